"""The colorization Caffe's ColorConv (forks/misc/colorization.py), against per-pixel references
written out here from the fork's formulas."""
import math

import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer, run_layer


def _lin(v):
    v = v / 255.0
    return v / 12.92 if v <= 0.04045 else math.pow((v + 0.055) / 1.055, 2.4)


def _f(t):
    return math.pow(t, 1.0 / 3) if t > 0.008867 else (903.3 * t + 16) / 116


def rgb_to_lab(r, g, b):
    r, g, b = _lin(r), _lin(g), _lin(b)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95074
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883
    return 116 * _f(y) - 16, 500 * (_f(x) - _f(y)), 200 * (_f(y) - _f(z))


def lab_to_rgb(L, a, b):
    fy = (L + 16) / 116
    x, y, z = [(f ** 3 if f > 0.206896 else (116 * f - 16) / 903.3) * w
               for f, w in ((fy + a / 500, 0.95074), (fy, 1.0), (fy - b / 200, 1.08883))]
    rgb = (3.2404542 * x - 1.5371385 * y - 0.4985314 * z,
           -0.9692660 * x + 1.8760108 * y + 0.0415560 * z,
           0.0556434 * x - 0.2040259 * y + 1.0572252 * z)
    return [255 * (u * 12.92 if u <= 0.0031308 else 1.055 * math.pow(u, 1 / 2.4) - 0.055)
            for u in rgb]


def _convert(src, dst, x):
    layer = make_layer('type: "ColorConv" color_conv_param { input: %s output: %s }' % (src, dst))
    return run_layer(layer, make_blobs([x]), make_blobs(1))[0]


def _per_pixel(fn, x):
    out = np.empty_like(x)
    for n in range(x.shape[0]):
        for i in range(x.shape[2]):
            for j in range(x.shape[3]):
                out[n, :, i, j] = fn(*x[n, :, i, j])
    return out


IMAGES = np.random.default_rng(0).uniform(0, 255, (2, 3, 4, 5))
IMAGES[0, :, 0, :3] = [[0, 255, 1], [0, 255, 2], [0, 255, 3]]    # black, white, near-black


def test_bgr_and_rgb_to_lab_every_image():
    want = _per_pixel(rgb_to_lab, IMAGES[:, ::-1])                  # IMAGES as BGR
    np.testing.assert_allclose(_convert("BGR", "Lab", IMAGES), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_convert("RGB", "Lab", IMAGES[:, ::-1]), want, rtol=1e-10,
                               atol=1e-10)
    # white: X / Xn = 0.95047 / 0.95074, Y = 1, Z / Zn = 1: L = 100, a = 500 (0.99991 - 1), b = 0
    np.testing.assert_allclose(want[0, :, 0, 1], [100.0, -0.0474, 0.0], atol=1e-4)
    np.testing.assert_allclose(want[0, :, 0, 0], [0.0, 0.0, 0.0], atol=1e-12)          # black


def test_lab_to_bgr_and_xyz_round_trip():
    lab = _per_pixel(rgb_to_lab, IMAGES)
    want = _per_pixel(lab_to_rgb, lab)
    np.testing.assert_allclose(_convert("Lab", "BGR", lab), want[:, ::-1], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(want, IMAGES, atol=0.05)              # the fork's rounded inverse
    xyz = _convert("RGB", "XYZ", IMAGES)
    np.testing.assert_allclose(_convert("XYZ", "Lab", xyz), lab, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_convert("Lab", "XYZ", lab), xyz, rtol=1e-9, atol=1e-12)


def test_gray():
    gray = _convert("BGR", "Gray", IMAGES)                           # Y weights on 0..255 values
    want = 0.2126729 * IMAGES[:, 2] + 0.7151522 * IMAGES[:, 1] + 0.0721750 * IMAGES[:, 0]
    np.testing.assert_allclose(gray, want[:, None], rtol=1e-12)
    np.testing.assert_array_equal(_convert("Gray", "BGR", gray), np.repeat(gray, 3, axis=1))
    np.testing.assert_array_equal(_convert("BGR", "RGB", IMAGES), IMAGES[:, ::-1])


def test_refusals_and_no_backward():
    with pytest.raises(NetError, match="not Lab -> Gray"):
        make_layer('type: "ColorConv" color_conv_param { input: Lab output: Gray }').setup(
            make_blobs([IMAGES]), make_blobs(1))
    with pytest.raises(NetError, match="1 channel"):
        _convert("Gray", "RGB", IMAGES)
    layer = make_layer('type: "ColorConv" color_conv_param { output: Lab }')
    bottom, top = make_blobs([IMAGES]), make_blobs(1)
    run_layer(layer, bottom, top)
    with pytest.raises(NetError, match="backward is not implemented"):
        layer.backward(top, [True], bottom)


NET = """
input: "data" input_shape { dim: 1 dim: 3 dim: 6 dim: 6 }
layer { # Convert to lab
  name: "img_lab" type: "ColorConv" bottom: "data" top: "img_lab" propagate_down: false
  color_conv_param {
    input: 0 # BGR
    output: 3 # Lab
  }
}
layer { name: "data_lab" type: "Convolution" bottom: "img_lab" top: "data_lab"
  propagate_down: false param { lr_mult: 0 decay_mult: 0 } param { lr_mult: 0 decay_mult: 0 }
  convolution_param { num_output: 3 kernel_size: 1 } }
"""


def test_schema_fields_and_excerpt():
    param = proto_io.read_net(NET)                 # strict reading: the fields are computed
    p = param.layer[1].color_conv_param
    space = caffe_pb2.ColorConvParameter
    assert (p.input, p.output) == (space.BGR, space.Lab)
    default = caffe_pb2.ColorConvParameter()
    assert (default.input, default.output) == (0, 0)
    assert caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name["color_conv_param"].number == 1030
    net = Net(param, caffe_pb2.TEST)
    net.blobs["data"].data[...] = IMAGES[:1, :, :4, :5].mean() * np.ones((1, 3, 6, 6))
    net.forward()
    lab = net.blobs["img_lab"].data
    np.testing.assert_allclose(lab[0, :, 0, 0], rgb_to_lab(*[IMAGES[:1, :, :4, :5].mean()] * 3),
                               rtol=1e-5, atol=1e-4)
