import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _run(proto, *xs):
    return run_layer(make_layer(proto, dtype=np.float64), make_blobs(list(xs)), make_blobs(1))[0]


def test_mish_values_and_gradient():
    x = np.array([[-2.0, -0.5, 0.0, 0.7, 3.0, 30.0]])
    y = _run('type: "Mish"', x)
    # the fork's closed form x - 2x / ((1 + e^x)^2 + 1)
    t = np.exp(x) + 1
    np.testing.assert_allclose(y, x - 2 * x / (t * t + 1), rtol=1e-12)
    np.testing.assert_allclose(y[0, 3], 0.7 * np.tanh(np.log1p(np.exp(0.7))))
    check_layer_gradient(make_layer('type: "Mish"', dtype=np.float64),
                         make_blobs([x[:, :5]]), make_blobs(1))


def test_mish_in_place_matches_out_of_place():
    x = np.random.default_rng(0).standard_normal((2, 3))
    dy = np.random.default_rng(1).standard_normal((2, 3))
    a, b = (make_layer('type: "Mish"', dtype=np.float64) for _ in range(2))
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(a, bottom, top)
    top[0].diff[...] = dy
    a.backward(top, [True], bottom)
    (blob,) = make_blobs([x])
    run_layer(b, [blob], [blob])
    np.testing.assert_allclose(blob.data, top[0].data)
    blob.diff[...] = dy
    b.backward([blob], [True], [blob])
    np.testing.assert_allclose(blob.diff, bottom[0].diff)


def test_hard_swish():
    x = np.array([-4.0, -3.0, -1.5, 0.0, 1.0, 3.0, 5.0])
    np.testing.assert_allclose(_run('type: "HardSwish"', x),
                               [0, 0, -1.5 * 1.5 / 6, 0, 4 / 6.0, 3, 5])
    check_layer_gradient(make_layer('type: "HardSwish"', dtype=np.float64),
                         make_blobs([np.array([-4.0, -1.5, 0.5, 2.0, 5.0])]), make_blobs(1))


def test_hard_sigmoid_defaults_and_params():
    x = np.array([-4.0, -1.0, 0.0, 1.0, 4.0])
    np.testing.assert_allclose(_run('type: "HardSigmoid"', x), [0, 0.3, 0.5, 0.7, 1])
    y = _run('type: "HardSigmoid" hard_sigmoid_param { alpha: 0.5 beta: 0 }', x)
    np.testing.assert_allclose(y, [0, 0, 0, 0.5, 1])
    check_layer_gradient(make_layer('type: "HardSigmoid"', dtype=np.float64),
                         make_blobs([np.array([-4.0, -1.0, 0.3, 1.0, 4.0])]), make_blobs(1))


def test_signed_sqrt_forward_and_fork_backward():
    x = np.array([[4.0, -9.0, 0.0, 0.25]])
    layer = make_layer('type: "SignedSqrt"', dtype=np.float64)
    bottom, top = make_blobs([x]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    np.testing.assert_allclose(y, [[2, -3, 0, 0.5]])
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, 0.5 / (np.abs(y) + 0.03))
    # far from 0 the epsilon is negligible next to the true derivative
    big = np.array([[400.0, -900.0, 2500.0]])
    check_layer_gradient(make_layer('type: "SignedSqrt"', dtype=np.float64),
                         make_blobs([big]), make_blobs(1), threshold=5e-3)


def test_l2_normalize():
    x = np.array([[[3.0, 0.0], [0.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]]])
    y = _run('type: "L2Normalize"', x)
    np.testing.assert_allclose(y[0], [[0.6, 0], [0, 0.8]], rtol=1e-7)
    np.testing.assert_allclose(y[1], 0.5 * np.ones((2, 2)), rtol=1e-7)
    x = np.random.default_rng(1).standard_normal((2, 3, 2))
    check_layer_gradient(make_layer('type: "L2Normalize"', dtype=np.float64),
                         make_blobs([x]), make_blobs(1))


def test_l2_normalize_refuses_in_place():
    layer = make_layer('type: "L2Normalize"')
    b = make_blobs([np.ones((1, 2))])
    with pytest.raises(NetError, match="in place"):
        run_layer(layer, b, b)


def test_scalar_axis_default_and_gradient():
    rng = np.random.default_rng(2)
    x, s = rng.standard_normal((2, 3, 4)), np.array([2.0, -1.0])
    y = _run('type: "Scalar"', x, s)          # axis 0: one factor per sample
    np.testing.assert_allclose(y, x * s[:, None, None])
    s1 = rng.standard_normal((3, 4))
    y = _run('type: "Scalar" scalar_param { axis: 1 }', x, s1)
    np.testing.assert_allclose(y, x * s1[None])
    check_layer_gradient(make_layer('type: "Scalar" scalar_param { axis: 1 }', dtype=np.float64),
                         make_blobs([x, s1]), make_blobs(1))


def test_scalar_shape_mismatch():
    with pytest.raises(NetError, match="does not match"):
        _run('type: "Scalar" scalar_param { axis: 1 }', np.ones((2, 3)), np.ones(2))


def test_computed_harvested_field_accepted_in_strict_mode(tmp_path):
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    path = tmp_path / "net.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 3 }\n'
                    'layer { name: "hs" type: "HardSigmoid" bottom: "data" top: "y"\n'
                    '  hard_sigmoid_param { alpha: 0.25 beta: 0.4 } }\n')
    net = Net(str(path), caffe_pb2.TEST)
    net.blobs["data"].data[...] = [[-4.0, 0.0, 1.0]]
    net.forward()
    np.testing.assert_allclose(net.blobs["y"].data, [[0, 0.4, 0.65]], rtol=1e-6)


def test_minrelu_values_gradient_and_strict_net(tmp_path):
    x = np.array([[-2.0, -0.5, 0.3, 1.5]])
    np.testing.assert_allclose(_run('type: "MinReLU"', x), [[-2.0, -0.5, 0.0, 0.0]])
    y = _run('type: "MinReLU" minrelu_param { positive_slope: 0.1 }', x)
    np.testing.assert_allclose(y, [[-2.0, -0.5, 0.03, 0.15]])
    xr = np.random.default_rng(2).standard_normal((2, 3, 4))
    xr[np.abs(xr) < 0.05] = 0.3                       # keep clear of the kink
    for proto in ('type: "MinReLU"', 'type: "MinReLU" minrelu_param { positive_slope: 0.25 }'):
        check_layer_gradient(make_layer(proto, dtype=np.float64), make_blobs([xr]), make_blobs(1))
    layer = make_layer('type: "MinReLU" minrelu_param { positive_slope: 0.5 }', dtype=np.float64)
    bottom, top = make_blobs([np.array([[0.0, -1.0, 2.0]])]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[0.5, 1.0, 0.5]])   # the fork's: nu at x = 0
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    path = tmp_path / "net.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 3 }\n'
                    'layer { name: "m" type: "MinReLU" bottom: "data" top: "data"\n'
                    '  minrelu_param { positive_slope: 0.5 } }\n')
    net = Net(str(path), caffe_pb2.TEST)
    net.blobs["data"].data[...] = [[-4.0, 0.0, 1.0]]
    net.forward()
    np.testing.assert_allclose(net.blobs["data"].data, [[-4.0, 0.0, 0.5]])


def test_normalization_l2_values_gradient_and_in_place():
    x = np.array([[3.0, 0.0, 0.0, 4.0], [1.0, 1.0, 1.0, 1.0]])
    y = _run('type: "NormalizationL2"', x)
    np.testing.assert_allclose(y, x / np.sqrt((x * x).sum(1, keepdims=True) + 1e-10))
    np.testing.assert_allclose(y[0], [0.6, 0, 0, 0.8], rtol=1e-9)
    x = np.random.default_rng(4).standard_normal((3, 2, 2))
    check_layer_gradient(make_layer('type: "NormalizationL2"', dtype=np.float64),
                         make_blobs([x]), make_blobs(1))
    b = make_blobs([x])
    layer = make_layer('type: "NormalizationL2"')
    run_layer(layer, b, b)
    dy = np.random.default_rng(5).standard_normal(x.shape)
    b[0].diff[...] = dy
    layer.backward(b, [True], b)
    ref_y = x / np.linalg.norm(x.reshape(3, -1), axis=1)[:, None, None]
    np.testing.assert_allclose(b[0].data, ref_y, rtol=1e-9)
    n = np.linalg.norm(x.reshape(3, -1), axis=1)[:, None, None]
    ref_dx = (dy - ref_y * (ref_y * dy).sum(axis=(1, 2), keepdims=True)) / n
    np.testing.assert_allclose(b[0].diff, ref_dx, rtol=1e-7)


def test_l2_normalization_per_item_without_epsilon():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4))
    y = _run('type: "L2Normalization"', x)
    assert y.shape == (3, 4, 1, 1)                      # the fork's legacy 4-D top
    np.testing.assert_allclose(y.reshape(3, 4), x / np.linalg.norm(x, axis=1, keepdims=True))
    check_layer_gradient(make_layer('type: "L2Normalization"'), make_blobs([x]), make_blobs(1))


def test_l2_normalization_l2n_param_global_axis_and_small_norms():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4))
    y = _run('type: "L2Normalization" l2n_param { }', x)   # is_global: the whole blob
    np.testing.assert_allclose(y, x / np.linalg.norm(x))
    text = 'type: "L2Normalization" l2n_param { is_global: false axis: 1 eps: 0.05 }'
    x[0, :, 2] = [0.1, 0.1, 0.1]                         # |x|^2 = 0.03 <= eps: copied
    y = _run(text, x)
    ref = x / np.linalg.norm(x, axis=1, keepdims=True)
    ref[0, :, 2] = x[0, :, 2]
    np.testing.assert_allclose(y, ref)
    for t in (text, 'type: "L2Normalization" l2n_param { }'):
        check_layer_gradient(make_layer(t), make_blobs([x]), make_blobs(1))


def test_normalization_keeps_the_bottom_shape():
    x = np.random.default_rng(7).standard_normal((3, 2, 2))
    y = _run('type: "Normalization"', x)
    assert y.shape == (3, 2, 2)
    np.testing.assert_allclose(y, x / np.linalg.norm(x.reshape(3, -1), axis=1)[:, None, None])
    check_layer_gradient(make_layer('type: "Normalization"'), make_blobs([x]), make_blobs(1))
