import numpy as np
import pytest
from PIL import Image

from caffepy.errors import CaffeError
from caffepy.forks.segmentation.seg_data import resize_nearest
from caffepy.testing import make_blobs, make_layer, run_layer


def _write(tmp_path, h=10, w=13, lab_shape=None):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    lab = rng.integers(0, 4, lab_shape or (h, w), dtype=np.uint8)
    Image.fromarray(img).save(tmp_path / "a.png")
    Image.fromarray(lab).save(tmp_path / "a_l.png")
    (tmp_path / "l.txt").write_text("a.png a_l.png\n")
    return img[:, :, ::-1], lab


def _layer(tmp_path, transform):
    return make_layer('type: "SegData" seg_data_param { source: "%s/l.txt" root_dir: "%s/" } '
                      'transform_param { %s }' % (tmp_path, tmp_path, transform),
                      dtype=np.float32)


def test_stride_floor_cap_and_values(tmp_path):
    img, lab = _write(tmp_path)
    data, label = run_layer(_layer(tmp_path, "stride: 4 mean_value: 100 scale: 0.5"), [],
                            make_blobs(2, np.float32))
    assert data.shape == (1, 3, 8, 12) and label.shape == (1, 1, 8, 12)
    # no rescale: the crop is a window of the image at the same offset in both tops
    for y0 in range(3):
        for x0 in range(2):
            if np.array_equal(label[0, 0], lab[y0:y0 + 8, x0:x0 + 12]):
                np.testing.assert_allclose(
                    data[0], (img[y0:y0 + 8, x0:x0 + 12].transpose(2, 0, 1) - 100.0) * 0.5)
                break
        else:
            continue
        break
    else:
        raise AssertionError("the label is no window of the label image")
    capped, = run_layer(_layer(tmp_path, "upper_size: 6"), [], make_blobs(2, np.float32))[:1]
    assert capped.shape == (1, 3, 6, 6)


def test_rescale_draws_sizes_and_errors(tmp_path):
    _write(tmp_path)
    layer = _layer(tmp_path, "scale_ratios: 0.5 scale_ratios: 1.5 mirror: true")
    bottom, top = [], make_blobs(2, np.float32)
    layer.setup(bottom, top)
    sizes = set()
    for _ in range(6):
        layer.forward(bottom, top)
        assert top[0].shape[2:] == top[1].shape[2:]
        sizes.add(top[0].shape[2:])
    assert len(sizes) > 1
    np.testing.assert_array_equal(resize_nearest(np.arange(4)[None], 1, 8)[0],
                                  [0, 0, 1, 1, 2, 2, 3, 3])
    _write(tmp_path, lab_shape=(10, 12))
    with pytest.raises(CaffeError, match="label a_l.png is 10x12"):
        run_layer(_layer(tmp_path, ""), [], make_blobs(2, np.float32))
