import numpy as np
import pytest
from scipy.io import loadmat

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer


def _layer(tmp_path, extra=""):
    return make_layer('type: "MatWrite" mat_write_param { prefix: "%s/out/" %s }'
                      % (tmp_path, extra), dtype=np.float32)


def test_round_trip_with_source(tmp_path):
    (tmp_path / "ids.txt").write_text("img_a.jpg 1\nimg_b.jpg 2\n")
    layer = _layer(tmp_path, 'source: "%s/ids.txt" strip: 4' % tmp_path)
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    b = np.random.RandomState(0).randn(2, 1).astype(np.float32)
    bottom = make_blobs([a, b], dtype=np.float32)
    layer.setup(bottom, [])
    layer.forward(bottom, [])
    m = loadmat(str(tmp_path / "out" / "img_a_blob_0.mat"))["data"]
    assert m.dtype == np.float32 and m.shape == (5, 4, 3, 2)
    assert m[4, 3, 2, 1] == a[1, 2, 3, 4]
    # MATLAB's column-major memory of the array equals the blob's row-major memory
    np.testing.assert_array_equal(m.ravel(order="F"), a.ravel())
    # a 2-axis blob: width, height 1 (Blob's legacy accessors), then channels, num
    m1 = loadmat(str(tmp_path / "out" / "img_a_blob_1.mat"))["data"]
    assert m1.shape == (1, 1, 1, 2)
    np.testing.assert_array_equal(m1, b.reshape(2, 1, 1, 1).T)
    layer.forward(bottom, [])
    assert (tmp_path / "out" / "img_b_blob_0.mat").exists()
    with pytest.raises(CaffeError, match="past the 2 names"):
        layer.forward(bottom, [])


def test_period_and_iter_names(tmp_path):
    layer = _layer(tmp_path, "period: 2")
    bottom = make_blobs([np.ones((1, 2, 2, 2))], dtype=np.float32)
    layer.setup(bottom, [])
    for _ in range(3):
        layer.forward(bottom, [])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "iter_0_blob_0.mat", "iter_2_blob_0.mat"]
