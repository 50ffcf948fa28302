"""caffe-yolo's BoxData reader (forks/yolo/box_data.py)."""
import numpy as np
import pytest

from caffepy.data import db as dbmod
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer


def _write(path, images_boxes, encoded=True):
    with dbmod.open_db(str(path), "lmdb", "w") as db:
        for i, (img, boxes) in enumerate(images_boxes):
            d = caffe_pb2.Datum()
            if encoded:
                d.data, d.encoded = encode_image(img, "png"), True
            else:
                d.channels, d.height, d.width = img.shape[2], img.shape[0], img.shape[1]
                d.data = img.transpose(2, 0, 1).tobytes()
            d.float_data.extend(np.ravel(boxes))
            db.put("%08d" % i, d.SerializeToString())


def _layer(path, phase, sides="side: 2 side: 1", tops=3):
    text = ('type: "BoxData" data_param { source: "%s" backend: LMDB batch_size: 2 %s }'
            % (path, sides))
    layer = make_layer(text, dtype=np.float32, phase=phase)
    bottom, top = [], make_blobs(tops, dtype=np.float32)
    layer.setup(bottom, top)
    return layer, top


def _image(seed):
    return np.random.default_rng(seed).integers(0, 256, (6, 8, 3)).astype(np.uint8)


BOXES = [[[3, 0, 0.3, 0.6, 0.25, 0.5], [1, 1, 0.9, 0.1, 0.1, 0.1]], [[0, 0, 0.5, 0.5, 1, 1]]]


def test_test_phase_gives_the_images_and_grid_labels(tmp_path):
    _write(tmp_path / "db", [(_image(0), BOXES[0]), (_image(1), BOXES[1])])
    layer, top = _layer(tmp_path / "db", caffe_pb2.TEST)
    try:
        layer.forward([], top)
    finally:
        layer.close()
    assert top[0].shape == (2, 3, 6, 8) and top[1].shape == (2, 28) and top[2].shape == (2, 7)
    np.testing.assert_array_equal(top[0].data[0], _image(0).transpose(2, 0, 1))
    lab = top[1].data[0]                  # side 2: box 0 in cell (1, 0) = 2, box 1 in (0, 1) = 1
    np.testing.assert_allclose(lab[:4], [0, 1, 0, 0])
    np.testing.assert_allclose(lab[4:8], [0, 1, 1, 0])
    np.testing.assert_allclose(lab[8:12], [-1, 1, 3, -1])
    np.testing.assert_allclose(lab[12 + 4:12 + 8], [0.9, 0.1, 0.1, 0.1], rtol=1e-6)
    np.testing.assert_allclose(lab[12 + 8:12 + 12], [0.3, 0.6, 0.25, 0.5], rtol=1e-6)
    one = top[2].data[0]                  # side 1: the later box overwrites the cell
    np.testing.assert_allclose(one, [1, 1, 1, 0.9, 0.1, 0.1, 0.1], rtol=1e-6)


def test_train_phase_crops_around_kept_box_centres(tmp_path):
    _write(tmp_path / "db", [(_image(2), BOXES[1])] * 2)
    layer, top = _layer(tmp_path / "db", caffe_pb2.TRAIN, sides="side: 1", tops=2)
    try:
        layer.forward([], top)
    finally:
        layer.close()
    assert top[0].shape == (2, 3, 6, 8)
    for lab in top[1].data:               # the centre pixel (4, 3) of the 8 x 6 image, kept
        assert lab[1] == 1 and lab[2] == 0
        assert 0 <= lab[3] < 1 and 0 <= lab[4] < 1 and lab[5] >= 1 and lab[6] >= 1


def test_bad_datums_give_one_line(tmp_path):
    _write(tmp_path / "a", [(_image(0), [[1, 0, 0.5, 0.5, 0.2]])] * 2)
    layer, top = _layer(tmp_path / "a", caffe_pb2.TEST, sides="side: 1", tops=2)
    with pytest.raises(CaffeError, match=r"float_data holds 5 values") as e:
        try:
            layer.forward([], top)
        finally:
            layer.close()
    assert "\n" not in str(e.value)
    _write(tmp_path / "b", [(_image(0), BOXES[1])] * 2, encoded=False)
    layer, top = _layer(tmp_path / "b", caffe_pb2.TEST, sides="side: 1", tops=2)
    with pytest.raises(CaffeError, match="encoded image"):
        try:
            layer.forward([], top)
        finally:
            layer.close()
    with pytest.raises(CaffeError, match="2 side value"):
        _layer(tmp_path / "b", caffe_pb2.TEST, sides="side: 1 side: 2", tops=2)
