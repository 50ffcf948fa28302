import numpy as np
import pytest
from google.protobuf import text_format

import caffepy
from caffepy.blob import Blob
from caffepy.errors import CaffeError
from caffepy.fillers import get_filler
from caffepy.proto import caffe_pb2


def filled(text, shape, dtype=np.float32, seed=1701):
    fp = caffe_pb2.FillerParameter()
    text_format.Parse(text, fp)
    caffepy.set_random_seed(seed)
    blob = Blob(shape, dtype=dtype)
    get_filler(fp).fill(blob)
    return blob.data


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_constant(dtype):
    x = filled('type: "constant" value: 2.5', (2, 3, 4), dtype)
    assert x.dtype == dtype
    assert np.all(x == 2.5)


def test_uniform_range_and_mean():
    x = filled('type: "uniform" min: -2 max: 3', (100, 100))
    assert x.min() >= -2 and x.max() <= 3
    assert abs(x.mean() - 0.5) < 0.05


def test_gaussian_statistics():
    x = filled('type: "gaussian" mean: 1 std: 2', (200, 100))
    assert abs(x.mean() - 1) < 0.05
    assert abs(x.std() - 2) < 0.05


def test_gaussian_sparse():
    x = filled('type: "gaussian" std: 1 sparse: 3', (20, 500))
    assert abs(np.mean(x != 0) - 3 / 20.0) < 0.02


def test_positive_unitball_rows_sum_to_one():
    x = filled('type: "positive_unitball"', (5, 3, 4))
    assert np.all(x >= 0) and np.all(x <= 1)
    np.testing.assert_allclose(x.reshape(5, -1).sum(axis=1), 1, rtol=1e-5)


@pytest.mark.parametrize("norm,n", [("FAN_IN", 3 * 5 * 5), ("FAN_OUT", 40 * 5 * 5),
                                    ("AVERAGE", (3 + 40) * 5 * 5 / 2.0)])
def test_xavier_and_msra_scale(norm, n):
    shape = (40, 3, 5, 5)
    x = filled('type: "xavier" variance_norm: %s' % norm, shape, np.float64)
    scale = np.sqrt(3.0 / n)
    assert x.min() >= -scale and x.max() <= scale
    assert abs(x.std() - scale / np.sqrt(3)) < 0.05 * scale
    x = filled('type: "msra" variance_norm: %s' % norm, shape, np.float64)
    assert abs(x.mean()) < 0.05 * np.sqrt(2.0 / n)
    assert abs(x.std() - np.sqrt(2.0 / n)) < 0.05 * np.sqrt(2.0 / n)


def test_bilinear_exact():
    x = filled('type: "bilinear"', (3, 1, 4, 4))
    w = np.array([0.25, 0.75, 0.75, 0.25])
    np.testing.assert_allclose(x, np.broadcast_to(np.outer(w, w), (3, 1, 4, 4)), rtol=1e-7)
    x = filled('type: "bilinear"', (1, 1, 3, 3))
    w = np.array([0.5, 1.0, 0.5])
    np.testing.assert_allclose(x[0, 0], np.outer(w, w), rtol=1e-7)


def test_bilinear_rejects_non_square():
    with pytest.raises(CaffeError, match="square"):
        filled('type: "bilinear"', (1, 1, 3, 4))


def test_reproducible_with_seed():
    a = filled('type: "gaussian"', (10, 10), seed=5)
    b = filled('type: "gaussian"', (10, 10), seed=5)
    c = filled('type: "gaussian"', (10, 10), seed=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_unknown_type_and_bad_sparse():
    with pytest.raises(CaffeError, match="unknown filler type 'foo'"):
        filled('type: "foo"', (2,))
    with pytest.raises(CaffeError, match="sparse"):
        filled('type: "uniform" sparse: 2', (2,))


def test_a_build_for_its_shapes_draws_nothing():
    """Under shapes_only (caffepy summary) a filler leaves the blob as it is and draws nothing
    from the random stream: a layer that fills its own blobs in set-up (a recurrent layer's
    weights) costs no time there; the next draw is the one it would have been."""
    from caffepy.layers.base import shapes_only
    param = caffe_pb2.FillerParameter(type="xavier")
    blob = Blob((4, 5))
    caffepy.set_random_seed(3)
    with shapes_only():
        get_filler(param).fill(blob)
    assert not blob.data.any()
    get_filler(param).fill(blob)
    after = blob.data.copy()
    caffepy.set_random_seed(3)
    get_filler(param).fill(blob)
    np.testing.assert_array_equal(blob.data, after)
    assert after.any()
    with shapes_only(), pytest.raises(CaffeError):
        get_filler(param).fill(Blob((0, 5)))          # the checks still apply


def _u(n):
    return np.array([2 * (i / (n - 1) - 0.5) for i in range(n)])


@pytest.mark.parametrize("option, rows", [
    ("xy", lambda u, v: [u, v]), ("-x^2y^2", lambda u, v: [-u ** 2, -v ** 2]),
    ("x", lambda u, v: [u]), ("y", lambda u, v: [v])])
def test_expectation_filler_reads_the_expected_pixel_position(option, rows):
    """dementrock/caffe's ExpectationFiller: weight (outputs, X Y), input index y X + x."""
    x, y = 4, 3
    u = np.array([_u(x)[i % x] for i in range(x * y)])
    v = np.array([_u(y)[i // x] for i in range(x * y)])
    want = np.array(rows(u, v))
    got = filled('type: "expectation" width: %d height: %d expectation_option: "%s"'
                 % (x, y, option), want.shape, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    # a softmax map that is one-hot at pixel (x=3, y=1) has expected position (u=1, v=0)
    p = np.zeros(x * y)
    p[1 * x + 3] = 1
    if option == "xy":
        np.testing.assert_allclose(got @ p, [1.0, 0.0], atol=1e-15)


def test_expectation_data_filler_and_the_expectation_fillers_checks():
    got = filled('type: "expectation_data" expectation_option: "y"', (2, 3, 3, 5),
                 dtype=np.float64)
    np.testing.assert_allclose(got[1, 2, :, 4], [-1.0, 0.0, 1.0])
    got = filled('type: "expectation_data" expectation_option: "x"', (1, 2, 5), dtype=np.float64)
    np.testing.assert_allclose(got[0, 1], [-1.0, -0.5, 0.0, 0.5, 1.0])
    with pytest.raises(CaffeError, match="x or y"):
        filled('type: "expectation_data"', (1, 2, 2))
    with pytest.raises(CaffeError, match="2 x width height"):
        filled('type: "expectation" width: 3 height: 3', (2, 8))
    with pytest.raises(CaffeError, match="unknown expectation_option"):
        filled('type: "expectation" width: 2 height: 2 expectation_option: "z"', (2, 4))


def test_msra_alpha_scales_for_the_prelu_slope():
    """happynear/caffe-windows: std = sqrt(2 / (n (1 + alpha^2)))."""
    plain = filled('type: "msra"', (2000, 50), dtype=np.float64)
    slope = filled('type: "msra" alpha: 0.25', (2000, 50), dtype=np.float64)
    np.testing.assert_allclose(slope, plain / np.sqrt(1 + 0.25 ** 2), rtol=1e-12)
    assert np.std(plain) == pytest.approx(np.sqrt(2 / 50), rel=0.02)
