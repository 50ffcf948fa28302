"""caffe_rtpose's Switch (forks/pose/switch.py): the last bottom passed through, the others
selectable, the gradient to the selected bottom only; its Maximum: each channel's peak."""
import numpy as np
import pytest

from caffepy.errors import NetError, ShapeError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(0)
XS = [RNG.standard_normal((2, 3, 4, 5)) for _ in range(3)]


def test_forward_passes_the_last_bottom_then_the_selected_one():
    layer = make_layer('type: "Switch"')
    bottom, top = make_blobs(XS), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    assert layer.switch_select == 2
    np.testing.assert_array_equal(y, XS[2])
    layer.select_switch(0)
    layer.forward(bottom, top)
    np.testing.assert_array_equal(top[0].data, XS[0])
    with pytest.raises(NetError, match="cannot select input 3"):
        layer.select_switch(3)
    (y,) = run_layer(make_layer('type: "Switch"'), make_blobs(XS[:1]), make_blobs(1))
    np.testing.assert_array_equal(y, XS[0])                       # one bottom: itself


def test_shape_of_bottom_0_and_first_values_of_the_selected_one():
    big = RNG.standard_normal((2, 3, 4, 6))
    (y,) = run_layer(make_layer('type: "Switch"'), make_blobs([XS[0], big]), make_blobs(1))
    assert y.shape == XS[0].shape
    np.testing.assert_array_equal(y.reshape(-1), big.reshape(-1)[:XS[0].size])
    with pytest.raises(ShapeError, match="fewer than bottom 0"):
        make_layer('type: "Switch"').setup(make_blobs([big, XS[0]]), make_blobs(1))
    with pytest.raises(ShapeError, match="same number of axes"):
        make_layer('type: "Switch"').setup(make_blobs([XS[0], XS[1].reshape(6, 20)]),
                                           make_blobs(1))


def test_gradient():
    check_layer_gradient(make_layer('type: "Switch"'), make_blobs(XS), make_blobs(1))
    layer = make_layer('type: "Switch"')
    bottom, top = make_blobs(XS), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.5
    layer.backward(top, [True, True, True], bottom)
    assert not bottom[0].diff.any() and not bottom[1].diff.any()
    np.testing.assert_array_equal(bottom[2].diff, np.full(XS[2].shape, 1.5))


NET = """
input: "image" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "conv5_5_CPM_L1" type: "Convolution" bottom: "image" top: "conv5_5_CPM_L1"
  convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "Mconv7_stage2_L1" type: "Convolution" bottom: "conv5_5_CPM_L1"
  top: "Mconv7_stage2_L1"
  convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 1 } } }
layer {
  name: "Switch_L1"
  type: "Switch"
  bottom: "conv5_5_CPM_L1"
  bottom: "Mconv7_stage2_L1"
  top: "Mconv7_stage6_L1_switch"
}
"""


def test_excerpt_net():
    net = Net(proto_io.read_net(NET), caffe_pb2.TEST)
    net.blobs["image"].data[...] = RNG.standard_normal((1, 3, 8, 8))
    net.forward()
    np.testing.assert_array_equal(net.blobs["Mconv7_stage6_L1_switch"].data,
                                  net.blobs["Mconv7_stage2_L1"].data)
    net.layer_dict["Switch_L1"].select_switch(0)
    net.forward()
    np.testing.assert_array_equal(net.blobs["Mconv7_stage6_L1_switch"].data,
                                  net.blobs["conv5_5_CPM_L1"].data)


def test_maximum_gives_each_channels_first_peak():
    rng = np.random.default_rng(0)
    maps = rng.uniform(0.1, 1, (2, 3, 4, 5))
    maps[1, 2] = -1.0                              # nothing above the smallest positive float
    maps[0, 1, 2, 3] = maps[0, 1, 3, 0] = 5.0      # ties: the first in raster order
    (p,) = run_layer(make_layer('type: "Maximum" bottom: "m"'), make_blobs([maps]),
                     make_blobs(1))
    assert p.shape == (2, 3, 1, 3)
    np.testing.assert_array_equal(p[0, 1, 0], [3, 2, 5])
    np.testing.assert_array_equal(p[1, 2, 0], [0, 0, np.finfo(np.float64).tiny])
    y, x = np.unravel_index(maps[1, 0].argmax(), (4, 5))
    np.testing.assert_array_equal(p[1, 0, 0], [x, y, maps[1, 0].max()])
