import numpy as np
import pytest

from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer

TEXT = ('type: "Atlas" atlas_param { model_name: "setup.config" total_output_layer_nums: 2 '
        'output_shape { dim: 75 dim: 1 dim: 32 dim: 7 } output_shape { dim: 32 dim: 75 } }')

NET = '''
layer { name: "input_data" type: "Input" top: "data"
        input_param { shape { dim: 2 dim: 3 dim: 32 dim: 30 } } }
layer { name: "npu" type: "Atlas" bottom: "data" top: "a" top: "b" %s }
'''


def test_shapes_from_the_parameters_and_no_forward():
    layer = make_layer(TEXT)
    bottom, top = make_blobs([np.zeros((2, 3, 4, 5))]), make_blobs(2)
    layer.setup(bottom, top)
    assert top[0].shape == (75, 1, 32, 7) and top[1].shape == (32, 75)
    with pytest.raises(Exception, match="Huawei NPU runtime"):
        layer.forward(bottom, top)


def test_in_a_net_and_the_count_check():
    text = TEXT[len('type: "Atlas" '):]
    net = Net(proto_io.read_net(NET % text), caffe_pb2.TEST)
    assert net.blobs["a"].shape == (75, 1, 32, 7)
    bad = text.replace("total_output_layer_nums: 2", "total_output_layer_nums: 3")
    with pytest.raises(Exception, match="total_output_layer_nums is 3"):
        Net(proto_io.read_net(NET % bad), caffe_pb2.TEST)
