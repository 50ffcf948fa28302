"""convolution_param shape_offset of happynear/caffe-windows' Deconvolution
(caffepy/layers/deconv.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

RNG = np.random.default_rng(13)


def _deconv(fields, kind="Deconvolution"):
    return make_layer('type: "%s" convolution_param { num_output: 1 bias_term: false '
                      'weight_filler { type: "constant" value: 1 } %s }' % (kind, fields))


def test_forward_by_hand():
    # 1-d like: input 1 x 2, kernel 1 x 2 ones, stride 2: O = 2 (2 - 1) + 2 = 4 wide; the
    # offset (1, 1) adds a row and a column the kernels never reach (zeros)
    x = np.array([[[[1.0, 2.0]]]])
    y = run_layer(_deconv("kernel_h: 1 kernel_w: 2 stride: 2 shape_offset: 1 shape_offset: 1"),
                  make_blobs([x]), make_blobs(1))[0]
    assert y.shape == (1, 1, 2, 5)
    np.testing.assert_array_equal(y[0, 0], [[1, 1, 2, 2, 0], [0, 0, 0, 0, 0]])


def test_with_pad_the_extra_column_takes_the_kernels_reach():
    # input 1 x 2, kernel 1 x 3, stride 2, pad_w 1: O = 2 + 3 - 2 = 3 (full 5 cropped by 1
    # each side: [1, 1, 1 + 2, 2, 2] -> [1, 3, 2]); offset 1 keeps the next one: [1, 3, 2, 2]
    x = np.array([[[[1.0, 2.0]]]])
    fields = "kernel_h: 1 kernel_w: 3 stride: 2 pad_h: 0 pad_w: 1"
    plain = run_layer(_deconv(fields), make_blobs([x]), make_blobs(1))[0]
    np.testing.assert_array_equal(plain[0, 0], [[1, 3, 2]])
    y = run_layer(_deconv(fields + " shape_offset: 0 shape_offset: 1"), make_blobs([x]),
                  make_blobs(1))[0]
    np.testing.assert_array_equal(y[0, 0], [[1, 3, 2, 2]])


def test_gradient():
    layer = make_layer('type: "Deconvolution" convolution_param { num_output: 2 kernel_size: 3 '
                       'stride: 2 pad: 1 shape_offset: 1 shape_offset: 1 '
                       'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }')
    bottom, top = make_blobs([RNG.standard_normal((2, 2, 3, 3))]), make_blobs(1)
    check_layer_gradient(layer, bottom, top)
    assert top[0].shape == (2, 2, 6, 6)


def test_convolution_ignores_it():
    x = RNG.standard_normal((1, 1, 4, 4))
    a = run_layer(_deconv("kernel_size: 2 stride: 2", "Convolution"), make_blobs([x]),
                  make_blobs(1))[0]
    b = run_layer(_deconv("kernel_size: 2 stride: 2 shape_offset: 1 shape_offset: 1",
                          "Convolution"), make_blobs([x]), make_blobs(1))[0]
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fields", ["kernel_size: 2 stride: 2 shape_offset: 1",
                                    "kernel_size: 2 stride: 2 shape_offset: 2 shape_offset: 0"])
def test_refusals(fields):
    with pytest.raises(CaffeError, match="shape_offset"):
        run_layer(_deconv(fields), make_blobs([np.zeros((1, 1, 3, 3))]), make_blobs(1))


NET = '''name: "upsample"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 5 dim: 5 } } }
layer { name: "up" type: "Deconvolution" bottom: "data" top: "up"
  convolution_param { num_output: 3 kernel_size: 4 stride: 2 pad: 1 shape_offset: 1
    shape_offset: 1 weight_filler { type: "bilinear" } bias_term: false } }
'''


def test_excerpt_summary_strict(tmp_path):
    net = strict_excerpt(tmp_path, NET)
    assert net.blobs["up"].shape == (1, 3, 11, 11)


def test_onnx_attributes_carry_it_as_output_padding():
    from caffepy.onnx.ops_conv import _conv_attrs
    layer = _deconv("kernel_size: 3 stride: 2 pad: 1 shape_offset: 1 shape_offset: 0")
    run_layer(layer, make_blobs([np.zeros((1, 1, 3, 3))]), make_blobs(1))
    assert _conv_attrs(layer, transposed=True)["output_padding"] == [1, 0]
    plain = _deconv("kernel_size: 3")
    run_layer(plain, make_blobs([np.zeros((1, 1, 3, 3))]), make_blobs(1))
    assert "output_padding" not in _conv_attrs(plain, transposed=True)
