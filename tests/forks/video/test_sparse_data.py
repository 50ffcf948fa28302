import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer
from caffepy.zoo import is_data_layer, replace_data_layers


def _layer(path, extra=""):
    text = ('name: "s" type: "SparseData" top: "x" sparse_data_param { source_file: "%s" '
            'mat_channels: 3 mat_height: 2 mat_width: 1 batch_size: 2 %s }' % (path, extra))
    layer = make_layer(text, dtype=np.float32, phase=caffe_pb2.TRAIN)
    top = make_blobs(1, np.float32)
    layer.setup([], top)
    return layer, top


def test_sparse_lines_fill_dense_items(tmp_path):
    # width 1: entries are (c, h, value); a later entry overwrites; "1.5" is two tokens, 1 and 5
    (tmp_path / "s.txt").write_text("img7 0 1 4 2 0 6\nimg8 1 1 3 1 1 2\n9 2 0 1.5\n")
    layer, top = _layer(tmp_path / "s.txt")
    assert top[0].shape == (2, 3, 2, 1)
    layer.forward([], top)
    x = np.zeros((2, 3, 2, 1))
    x[0, 0, 1, 0], x[0, 2, 0, 0] = 4, 6
    x[1, 1, 1, 0] = 2
    np.testing.assert_array_equal(top[0].data, x)
    with pytest.raises(CaffeError, match="incorrect number"):
        layer.forward([], top)               # line 3 gives 2 0 1 5: not groups of 3
    layer.close()


def test_probability_wrap_and_zoo(tmp_path):
    (tmp_path / "s.txt").write_text("1 0 0 1 1 1 3\n2 2 1 2")
    layer, top = _layer(tmp_path / "s.txt", "probability: true")
    layer.forward([], top)
    np.testing.assert_allclose(top[0].data[0].reshape(-1), [0.25, 0, 0, 0.75, 0, 0])
    np.testing.assert_allclose(top[0].data[1].reshape(-1), [0, 0, 0, 0, 0, 1])
    layer.forward([], top)                   # the file wraps
    np.testing.assert_allclose(top[0].data[0].reshape(-1), [0.25, 0, 0, 0.75, 0, 0])
    layer.close()
    net = caffe_pb2.NetParameter()
    net.layer.add().CopyFrom(layer.layer_param)
    assert is_data_layer(net.layer[0])
    assert list(replace_data_layers(net).layer[0].input_param.shape[0].dim) == [2, 3, 2, 1]
