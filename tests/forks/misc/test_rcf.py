"""RCF's AutoCrop (forks/misc/rcf.py): the offset from the net's coordinate maps, the crop."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.rcf import AutoCropLayer
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer

# An RCF side output in small: a dilated convolution, a pooling, a 1x1 score, a 2x upsampling.
# data -> conv (k 3, dilation 2: extent 5, pad 4): x + 4 - 2 = x + 2
#      -> pool (k 2, s 2): (x + 2 - 0.5) / 2 -> score: identity
#      -> up (k 4, s 2): 2 y + 1.5 = x + 3, so up[h + 3] lies over data[h]: offset 3.
# H = 12: conv 16, pool 8, up 18; the crop takes up[3:15, 3:15]. The second crop reads the first
# one's top (its map is x - 3 there), so data -> out is the identity: offset 0.
NET = """
input: "data" input_shape { dim: 1 dim: 1 dim: 12 dim: 12 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 2 kernel_size: 3 dilation: 2 pad: 4
    weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "score" type: "Convolution" bottom: "pool" top: "score"
  convolution_param { num_output: 1 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "up" type: "Deconvolution" bottom: "score" top: "up"
  convolution_param { num_output: 1 kernel_size: 4 stride: 2
    weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "crop" type: "AutoCrop" bottom: "up" bottom: "data" top: "out" }
layer { name: "crop_again" type: "AutoCrop" bottom: "out" bottom: "data" top: "out2" }
"""


def _net(text=NET):
    return Net(proto_io.read_net(text), caffe_pb2.TEST)


def test_offset_from_the_coordinate_maps_and_the_crop():
    net = _net()
    crop = net.layer_dict["crop"]
    assert isinstance(crop, AutoCropLayer) and crop.type == "AutoCrop"
    assert crop.offsets == (3, 3) and net.layer_dict["crop_again"].offsets == (0, 0)
    assert net.blobs["up"].shape == (1, 1, 18, 18) and net.blobs["out"].shape == (1, 1, 12, 12)
    net.blobs["data"].data[...] = np.random.default_rng(0).standard_normal((1, 1, 12, 12))
    net.forward()
    up = net.blobs["up"].data
    np.testing.assert_array_equal(net.blobs["out"].data, up[:, :, 3:15, 3:15])
    np.testing.assert_array_equal(net.blobs["out2"].data, net.blobs["out"].data)


def test_gradient():
    net = _net()
    rng = np.random.default_rng(1)
    bottom = make_blobs([rng.standard_normal((2, 3, 18, 18)), np.zeros((1, 1, 12, 12))])
    check_layer_gradient(net.layer_dict["crop"], bottom, make_blobs(1), check_bottom=[0])


def test_undilated_path_matches_a_hand_computed_offset():
    # without the dilation the convolution maps x -> x + 4 - 1: (x + 3 - 0.5) / 2, then x + 4
    net = _net(NET.replace(" dilation: 2", ""))
    assert net.layer_dict["crop"].offsets == (4, 4)


def test_refusals():
    with pytest.raises(NetError, match="non-positive shift"):           # up lies inside data
        _net(NET.replace("pad: 4", "pad: 0"))
    with pytest.raises(NetError, match="no coordinate map"):
        _net(NET.replace('name: "relu" type: "ReLU" bottom: "conv" top: "conv"',
                         'name: "relu" type: "Reshape" bottom: "conv" top: "conv2" '
                         'reshape_param { shape { dim: 0 dim: 0 dim: 0 dim: -1 } }')
             .replace('bottom: "conv" top: "pool"', 'bottom: "conv2" top: "pool"'))
    with pytest.raises(NetError, match="disconnected"):
        _net(NET.replace('bottom: "up" bottom: "data" top: "out"',
                         'bottom: "up" bottom: "ref" top: "out"')
             .replace('input: "data"', 'input: "ref" input_shape { dim: 1 dim: 1 dim: 12 dim: 12 }'
                      '\ninput: "data"'))
    with pytest.raises(NetError, match="build it in a Net"):
        layer = make_layer('type: "AutoCrop"')
        layer.setup(make_blobs([np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 2, 2))]), make_blobs(1))
