"""The behaviours of pycaffe's test_coord_map.py."""
import random

import numpy as np
import pytest

import caffepy as caffe
from caffepy import layers as L, params as P
from caffepy.pycaffe.coord_map import coord_map_from_to, crop


def coord_net_spec(ks=3, stride=1, pad=0, pool=2, dstride=2, dpad=0):
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 1, 100, 100]))
    n.aux = L.Input(shape=dict(dim=[2, 1, 20, 20]))
    n.conv = L.Convolution(n.data, num_output=10, kernel_size=ks, stride=stride, pad=pad)
    n.pool = L.Pooling(n.conv, pool=P.Pooling.MAX, kernel_size=pool, stride=pool, pad=0)
    deconv_ks = [s * 2 for s in dstride] if isinstance(dstride, list) else dstride * 2
    n.deconv = L.Deconvolution(n.pool, num_output=10, kernel_size=deconv_ks, stride=dstride, pad=dpad)
    return n


def test_conv_pool_deconv():
    ax, a, b = coord_map_from_to(*(lambda n: (n.deconv, n.data))(coord_net_spec()))
    assert (ax, a, b) == (1, 1, 0)
    n = coord_net_spec(pool=4, dstride=4)
    assert coord_map_from_to(n.deconv, n.data) == (1, 1, -1)


def test_pass_through_and_1x1():
    n = coord_net_spec()
    base = coord_map_from_to(n.deconv, n.data)
    n.relu = L.ReLU(n.deconv)
    n.conv1x1 = L.Convolution(n.relu, num_output=10, kernel_size=1, stride=1, pad=0)
    for top in (n.relu, n.conv1x1):
        assert coord_map_from_to(top, n.data) == base


def test_padding():
    _, a, b = coord_map_from_to(*(lambda n: (n.deconv, n.data))(coord_net_spec()))
    pad = random.randint(1, 10)
    for kw, shift in ((dict(pad=pad), -pad), (dict(dpad=pad), pad), (dict(pad=pad, dpad=pad), 0)):
        n = coord_net_spec(**kw)
        _, a2, b2 = coord_map_from_to(n.deconv, n.data)
        assert a2 == a and b2 == b + shift


def test_multi_bottom_top():
    n = coord_net_spec()
    n.conv_data, n.conv_aux = L.Convolution(n.data, n.aux, ntop=2, num_output=10, kernel_size=5,
                                            stride=2, pad=0)
    assert coord_map_from_to(n.conv_data, n.data) == coord_map_from_to(n.conv_aux, n.aux)


def test_rect_and_nd():
    m33 = coord_net_spec(ks=3, stride=1, pad=0)
    m55 = coord_net_spec(ks=5, stride=2, pad=10)
    m35 = coord_net_spec(ks=[3, 5], stride=[1, 2], pad=[0, 10])
    ax3, a3, b3 = coord_map_from_to(m33.deconv, m33.data)
    ax5, a5, b5 = coord_map_from_to(m55.deconv, m55.data)
    ax35, a35, b35 = coord_map_from_to(m35.deconv, m35.data)
    assert ax3 == ax5 == ax35
    assert (a3, b3, a5, b5) == (a35[0], b35[0], a35[1], b35[1])
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 100, 100, 100]))
    n.conv = L.Convolution(n.data, num_output=10, kernel_size=[3, 3, 3], stride=[1, 1, 1], pad=[0, 1, 2])
    n.pool = L.Pooling(n.conv, pool=P.Pooling.MAX, kernel_size=2, stride=2, pad=0)
    n.deconv = L.Deconvolution(n.pool, num_output=10, kernel_size=4, stride=2, pad=0)
    ax, a, b = coord_map_from_to(n.deconv, n.data)
    assert ax == 1 and len(a) == len(b) and np.all(a == 1)
    assert b[0] - 1 == b[1] and b[1] - 1 == b[2]


def test_crop_of_crop_and_crop_helper_builds():
    n = coord_net_spec()
    offset = random.randint(0, 10)
    ax, a, b = coord_map_from_to(n.deconv, n.data)
    n.crop = L.Crop(n.deconv, n.data, axis=2, offset=offset)
    assert coord_map_from_to(n.crop, n.data) == (ax, a, b + offset)
    n = coord_net_spec(pool=4, dstride=4)
    n.score = crop(n.deconv, n.data)
    layer = n.to_proto().layer[-1]
    assert layer.type == "Crop" and layer.crop_param.axis == 2 and list(layer.crop_param.offset) == [1]
    net = caffe.Net(n.to_proto(), caffe.TEST)
    assert net.blobs["score"].shape == (2, 10, 100, 100)


def test_errors():
    n = coord_net_spec()
    n.ip = L.InnerProduct(n.deconv, num_output=10)
    with pytest.raises(RuntimeError):
        coord_map_from_to(n.ip, n.data)
    n = coord_net_spec(pool=3, dstride=2)
    with pytest.raises(AssertionError, match="scale mismatch"):
        crop(n.deconv, n.data)
    n = coord_net_spec(dpad=10)
    with pytest.raises(AssertionError, match="negative offset"):
        crop(n.deconv, n.data)
