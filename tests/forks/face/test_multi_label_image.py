import numpy as np
import pytest

from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.forks.face.multi_label_image import read_multi_label_list
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer
from caffepy.zoo import is_data_layer


def _images(tmp_path, n):
    for i in range(n):
        img = np.full((4, 5, 3), i * 10, np.uint8)
        (tmp_path / ("im%d.png" % i)).write_bytes(encode_image(img, "png"))


def test_list_reading_follows_the_forks_stream(tmp_path):
    def read(d, text):
        (d / "l.txt").write_text(text)
        return read_multi_label_list(str(d / "l.txt"))

    d = tmp_path
    assert read(d, "abc 1 2.5\nabd -1 3\n") == [("abc", [1.0, 2.5]), ("abd", [-1.0, 3.0])]
    assert read(d, "abc 1 2\r\nabd 3 4\r\n") == [("abc", [1, 2, 2]), ("abd", [3, 4, 4])]
    assert read(d, "abc 1\nabc 2\nabe 3\n") == [("abc", [1.0])]        # a repeated name ends it
    assert read(d, "abc 1\nx 2\nabe 3\n") == [("abc", [1.0])]          # so does a short one
    with pytest.raises(CaffeError, match="label count"):
        read(d, "abc 1 2\nabd 3\n")
    with pytest.raises(CaffeError, match="not a number"):
        read(d, "abc 1 q\n")


def test_reader_gives_images_and_label_rows(tmp_path):
    _images(tmp_path, 3)
    (tmp_path / "list.txt").write_text("im0.png 0 0.5\nim1.png 1 1.5\nim2.png 2 2.5\n")
    text = ('type: "MultiLabelImageData" top: "data" top: "label" image_data_param { source: "%s" '
            'root_folder: "%s/" batch_size: 4 label_cut_start: 1 }'
            % (tmp_path / "list.txt", tmp_path))
    layer = make_layer(text, dtype=np.float32, phase=caffe_pb2.TRAIN)
    top = make_blobs(2, np.float32)
    layer.setup([], top)
    assert top[0].shape == (4, 3, 4, 5) and top[1].shape == (2, 2)
    layer.forward([], top)
    np.testing.assert_array_equal(top[0].data[:, 0, 0, 0], [0, 10, 20, 0])
    np.testing.assert_array_equal(top[1].data, [[1, 1.5], [2, 2.5]])   # items 1 and 2
    layer.close()
    assert is_data_layer(layer.layer_param)          # caffepy.zoo still swaps it for inputs
    bad = make_layer(text.replace("batch_size: 4", "batch_size: 4 face_transform: true"))
    with pytest.raises(CaffeError, match="face_transform"):
        bad.setup([], make_blobs(2, np.float32))
