"""FlowNet 2's DisparityData: PFM maps read as CImg 1.6.0 (rows bottom first), negated."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer


def _pfm(path, img, little=False):
    """PFM bytes written out by hand: rows from the bottom, byte order from the scale's sign."""
    c, h, w = img.shape
    body = img[:, ::-1].transpose(1, 2, 0).astype("<f4" if little else ">f4").tobytes()
    path.write_bytes(b"P%s\n%d %d\n%s\n" % (b"F" if c == 3 else b"f", w, h,
                                            b"-1.0" if little else b"1.0") + body)


def _layer(tmp_path, extra=""):
    return make_layer('type: "DisparityData" top: "d" top: "l" image_data_param { source: "%s" '
                      'root_folder: "%s/" batch_size: 3 new_height: 2 new_width: 3 %s }'
                      % (tmp_path / "list.txt", tmp_path, extra))


def test_disparity_data_reads_negated_first_channel(tmp_path):
    rng = np.random.default_rng(2)
    maps = [rng.standard_normal((1, 2, 3)).astype(np.float32) for _ in range(2)]
    _pfm(tmp_path / "a.pfm", maps[0])
    _pfm(tmp_path / "b.pfm", maps[1], little=True)
    (tmp_path / "list.txt").write_text("a.pfm 4\nb.pfm 7\n")
    layer, top = _layer(tmp_path, "is_color: false"), make_blobs(2)
    layer.setup([], top)
    layer.forward([], top)
    assert top[0].shape == (3, 1, 2, 3)
    for n, k in enumerate((0, 1, 0)):
        np.testing.assert_array_equal(top[0].data[n], -maps[k])
    np.testing.assert_array_equal(top[1].data, [4, 7, 4])
    layer.close()


def test_disparity_data_colour_copies_only_the_first_channel(tmp_path):
    img = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    _pfm(tmp_path / "c.pfm", img)
    (tmp_path / "list.txt").write_text("c.pfm 0\n")
    layer, top = _layer(tmp_path), make_blobs(2)
    layer.setup([], top)
    layer.forward([], top)
    assert top[0].shape == (3, 3, 2, 3)
    np.testing.assert_array_equal(top[0].data[:, 0], np.broadcast_to(-img[0], (3, 2, 3)))
    assert not top[0].data[:, 1:].any()
    layer.close()


def test_disparity_data_wrong_size_is_one_line(tmp_path):
    _pfm(tmp_path / "a.pfm", np.zeros((1, 4, 3), np.float32))
    (tmp_path / "list.txt").write_text("a.pfm 0\n")
    top = make_blobs(2)
    with pytest.raises(CaffeError, match="needs 1 x 2 x 3") as e:
        _layer(tmp_path, "is_color: false").setup([], top)
    assert "\n" not in str(e.value)
