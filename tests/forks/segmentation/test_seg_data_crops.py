"""TSN caffe's SegData reader (caffepy/forks/segmentation/seg_data.py): stride-floored crops of image and label, one-line errors."""
import numpy as np
import pytest

from caffepy import common
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer


def _files(tmp_path, n=2):
    lines = []
    for i in range(n):
        img = np.random.default_rng(i).integers(0, 256, (10, 13, 3)).astype(np.uint8)
        lab = np.arange(130).reshape(10, 13).astype(np.uint8)
        (tmp_path / ("i%d.png" % i)).write_bytes(encode_image(img, "png"))
        (tmp_path / ("l%d.png" % i)).write_bytes(encode_image(lab[:, :, None], "png"))
        lines.append("i%d.png l%d.png" % (i, i))
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "list.txt"), str(tmp_path) + "/"


def _layer(src, root, tp):
    text = ('type: "SegData" seg_data_param { source: "%s" root_dir: "%s" } transform_param { %s }'
            % (src, root, tp))
    layer, top = make_layer(text), make_blobs(2)
    layer.setup([], top)
    return layer, top


def test_stride_floored_crops_of_image_and_label(tmp_path):
    src, root = _files(tmp_path)
    layer, top = _layer(src, root, "stride: 4 mean_value: 100 scale: 0.5")
    assert top[0].shape == (1, 3, 8, 12) and top[1].shape == (1, 1, 8, 12)
    common.set_random_seed(3)
    layer.forward([], top)
    from PIL import Image
    img = np.asarray(Image.open(root + "i0.png"))[:, :, ::-1]
    lab = np.arange(130).reshape(10, 13)
    found = False
    for ho in range(3):                 # the crop is one of the 3 x 2 offsets of the 10 x 13 image
        for wo in range(2):
            if np.array_equal(top[1].data[0, 0], lab[ho:ho + 8, wo:wo + 12]):
                ref = (img[ho:ho + 8, wo:wo + 12].transpose(2, 0, 1) - 100.0) * 0.5
                np.testing.assert_allclose(top[0].data[0], ref)
                found = True
    assert found


def test_scale_ratios_resize_and_upper_size(tmp_path):
    src, root = _files(tmp_path)
    layer, top = _layer(src, root, "stride: 2 scale_ratios: 1.5 scale_ratios: 1.5 upper_size: 12")
    layer.forward([], top)
    # 10 x 13 at 1.5: 15 x 20 (int(19.5 + 0.5)); floored to 14 x 20, capped at 12
    assert top[0].shape == (1, 3, 12, 12) and top[1].shape == (1, 1, 12, 12)
    assert set(np.unique(top[1].data)) <= set(range(130))


def test_bad_inputs_give_one_line(tmp_path):
    with pytest.raises(CaffeError, match="cannot open"):
        _layer(str(tmp_path / "none.txt"), "", "")
    (tmp_path / "list.txt").write_text("missing.png label.png\n")
    with pytest.raises(CaffeError, match="missing.png") as e:
        _layer(str(tmp_path / "list.txt"), str(tmp_path) + "/", "")
    assert "\n" not in str(e.value)
