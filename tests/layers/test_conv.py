import contextlib
import itertools

import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.math import kernels
from caffepy.math.cpu import col2im, im2col
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.oracle import STRICT, check_layer
from tests.conftest import shared_path


def _windows(x_shape, k, stride, pad, dilation):
    """Output shape by Caffe's C++ int division (truncated toward zero: int() of the ratio),
    the zero padding of the input (pad before; pad plus the last window's overhang after), and
    per output position its window's slices of the padded input."""
    out, widths = [], []
    for s, kk, p, st, d in zip(x_shape[2:], k, pad, stride, dilation):
        extent = d * (kk - 1) + 1
        o = int((s + 2 * p - extent) / st) + 1
        out.append(o)
        widths.append((p, max(p, (o - 1) * st + extent - s - p)))
    windows = [(pos, tuple(slice(o * st, o * st + d * (kk - 1) + 1, d)
                           for o, st, d, kk in zip(pos, stride, dilation, k)))
               for pos in itertools.product(*[range(o) for o in out])]
    return tuple(out), [(0, 0), (0, 0)] + widths, windows


def naive_conv(x, w, b, stride, pad, dilation, group):
    """Direct n-d convolution by loops over output positions (small shapes only)."""
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    out, widths, windows = _windows(x.shape, w.shape[2:], stride, pad, dilation)
    xp = np.pad(x, widths)
    y = np.zeros((n, m) + out)
    mg = m // group
    for pos, sl in windows:
        for g in range(group):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            wg = w[g * mg:(g + 1) * mg]
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + pos] = np.tensordot(
                patch, wg, axes=(list(range(1, patch.ndim)), list(range(1, wg.ndim))))
    if b is not None:
        y += b.reshape((1, -1) + (1,) * len(out))
    return y


def naive_conv_backward(x, w, dy, stride, pad, dilation):
    """(dx, dw, db) of :func:`naive_conv` (group 1) by the same loops."""
    out, widths, windows = _windows(x.shape, w.shape[2:], stride, pad, dilation)
    xp = np.pad(x, widths)
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    for pos, sl in windows:
        g = dy[(slice(None), slice(None)) + pos]                   # (N, M)
        dw += np.tensordot(g, xp[(Ellipsis,) + sl], axes=(0, 0))
        dxp[(Ellipsis,) + sl] += np.tensordot(g, w, axes=(1, 0))
    inner = (Ellipsis,) + tuple(slice(p, p + s) for (p, _), s in zip(widths[2:], x.shape[2:]))
    return dxp[inner], dw, dy.sum(axis=tuple(i for i in range(dy.ndim) if i != 1))


def test_im2col_col2im_adjoint_every_layout():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 4, 6))
    geo = ((2, 3, 2), (1, 1, 0), (1, 2, 2), (1, 1, 2))
    for layout in ("image", "batch", "last"):
        col = im2col(x, *geo, layout=layout)
        r = rng.standard_normal(col.shape)
        np.testing.assert_allclose(np.sum(col * r), np.sum(x * col2im(r, x.shape, *geo,
                                                                         layout=layout)))


CONV = ('type: "Convolution" convolution_param { num_output: %d %s '
        'weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "gaussian" } }')


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,fields,num_output", [
    ((2, 4, 7, 6), "kernel_size: 3", 3),
    ((2, 4, 7, 6), "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0", 2),
    ((2, 4, 9, 8), "kernel_size: 3 dilation: 2 pad: 2 stride: 2 group: 2", 4),
    ((2, 4, 5, 6), "kernel_size: 1 bias_term: false", 5),
    ((1, 2, 5, 4, 6), "kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 stride: 1", 3),
])
@pytest.mark.parametrize("batch", ["as given", "one image"])
def test_convolution_forward_matches_naive(dtype, shape, fields, num_output, batch):
    """One image takes its own route (columns straight from x, the GEMM writing the top)."""
    if batch == "one image":
        shape = (1,) + shape[1:]
    x = np.random.default_rng(1).standard_normal(shape)
    layer = make_layer(CONV % (num_output, fields), dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    b = layer.blobs[1].data if len(layer.blobs) > 1 else None
    ref = naive_conv(x, layer.blobs[0].data.astype(np.float64), b, layer.stride, layer.pad,
                     layer.dilation, layer.group)
    np.testing.assert_allclose(y, ref, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)


@pytest.mark.parametrize("kind,fields", [
    ("Convolution", "kernel_size: 3 stride: 2 pad: 1 group: 2"),
    ("Convolution", "kernel_size: 2 dilation: 2"),
    ("Convolution", "kernel_size: 3 pad: 2 dilation: 2 group: 2"),
    ("Convolution", "kernel_size: 3 pad: 1"),
    ("Convolution", "kernel_size: 1"),
    ("Deconvolution", "kernel_size: 3 stride: 2 pad: 1 group: 2"),
    ("Deconvolution", "kernel_size: 2 dilation: 2"),
    ("Convolution", "kernel_size: 3 dilation: 0 pad: 1 stride: 2"),
    ("Deconvolution", "kernel_size: 2 dilation: 0 stride: 2"),
])
def test_convolution_gradient(kind, fields):
    x = np.random.default_rng(2).standard_normal((2, 4, 5, 4))
    layer = make_layer((CONV % (4, fields)).replace("Convolution", kind))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_convolution_two_bottoms_share_weights():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 3, 5, 5)) for _ in range(2)]
    layer = make_layer(CONV % (2, "kernel_size: 3"))
    check_layer_gradient(layer, make_blobs(xs), make_blobs(2))


def test_convolution_axis_and_3d_gradient():
    x = np.random.default_rng(4).standard_normal((2, 3, 2, 4, 5))
    layer = make_layer(CONV % (2, "kernel_size: 2 axis: 2"))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    assert layer.blobs[0].shape == (2, 2, 2, 2)


def test_deconvolution_is_adjoint_of_convolution():
    rng = np.random.default_rng(5)
    fields = "kernel_size: 3 stride: 2 pad: 1 group: 2 bias_term: false"
    conv = make_layer(CONV % (6, fields))
    deconv = make_layer((CONV % (4, fields)).replace("Convolution", "Deconvolution"))
    x = rng.standard_normal((2, 4, 7, 7))
    (y,) = run_layer(conv, make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 6, 4, 4)
    z, xt = make_blobs([rng.standard_normal(y.shape)]), make_blobs(1)
    deconv.setup(z, xt)
    deconv.blobs[0].data[...] = conv.blobs[0].data
    deconv.forward(z, xt)
    z, xt = z[0].data, xt[0].data
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.sum(y * z), np.sum(x * xt))


def test_depthwise_sets_group_to_channels():
    x = np.random.default_rng(6).standard_normal((2, 3, 5, 5))
    for t in ("DepthwiseConvolution", "ConvolutionDepthwise"):
        layer = make_layer((CONV % (3, "kernel_size: 3 pad: 1")).replace("Convolution", t))
        check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
        assert layer.group == 3 and layer.blobs[0].shape == (3, 1, 3, 3)


@pytest.mark.parametrize("num_output,group", [(16, 16), (6, 1), (3, 3)])
def test_convolution_depthwise_keeps_the_channels_whatever_num_output_says(num_output, group):
    """conv_dw_layer.cpp (the ConvolutionDepthwise fork) reads neither num_output nor group: one
    filter per input channel, the top has the bottom's channels (a MnasNet file declares 16
    outputs for 32 channels); DepthwiseConvolution keeps Convolution's num_output."""
    x = np.random.default_rng(7).standard_normal((2, 3, 6, 5))
    layer = make_layer((CONV % (num_output, "kernel_size: 3 pad: 1 stride: 2 group: %d" % group))
                       .replace("Convolution", "ConvolutionDepthwise"))
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert layer.type == "ConvolutionDepthwise" and y.shape == (2, 3, 3, 3)
    assert layer.blobs[0].shape == (3, 1, 3, 3) and layer.blobs[1].shape == (3,)
    ref = naive_conv(x, layer.blobs[0].data.astype(np.float64), layer.blobs[1].data,
                     layer.stride, layer.pad, layer.dilation, 3)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("fields,match", [
    ("", "kernel_size"),
    ("kernel_size: 3 kernel_h: 3 kernel_w: 3", "not both"),
    ("kernel_size: 3 group: 2", "multiples of group"),
    ("kernel_size: 2 kernel_size: 2 kernel_size: 2", "once per spatial axis"),
])
def test_convolution_errors(fields, match):
    layer = make_layer(CONV % (3, fields))
    with pytest.raises(NetError, match=match):
        layer.setup(make_blobs([np.zeros((1, 3, 5, 5))]), make_blobs(1))


@pytest.mark.parametrize("case", ["conv_basic", "conv_stride_pad", "conv_rect", "conv_dilated",
                                  "conv_1x1_nobias", "conv_3d", "deconv", "deconv_group",
                                  "deconv_bilinear"])
def test_convolution_matches_caffe(case):
    check_layer(shared_path("caffe-reference", case), STRICT)


def test_last_layout_is_the_batch_layout_with_the_image_index_innermost():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2, 6, 5))
    for geo in (((3, 2), (1, 0), (1, 2), (1, 1)), ((2, 2), (0, 1), (2, 1), (2, 1))):
        batch, last = im2col(x, *geo, layout="batch"), im2col(x, *geo, layout="last")
        rows, o = batch.shape[0], batch.shape[1] // 3
        np.testing.assert_array_equal(
            last, batch.reshape(rows, 3, o).transpose(0, 2, 1).reshape(rows, -1))
        r = rng.standard_normal(batch.shape)
        r_last = r.reshape(rows, 3, o).transpose(0, 2, 1).reshape(rows, -1)
        np.testing.assert_allclose(col2im(r_last, x.shape, *geo, layout="last"),
                                   col2im(r, x.shape, *geo, layout="batch"), rtol=1e-12, atol=1e-12)


def test_transpose_into_any_shape():
    from caffepy.math.cpu import transpose_into
    rng = np.random.default_rng(3)
    for shape in ((1000, 7), (300, 64), (5, 9), (64, 300), (20, 5000), (3, 4099)):
        a = rng.standard_normal(shape).astype(np.float32)
        out = np.empty(shape[::-1], np.float32)
        np.testing.assert_array_equal(transpose_into(a, out), a.T)


def test_im2col_layer_bvlc():
    """BVLC's Im2col: every 2 x 2 window (pad 1, stride 2) in the channels, (c, kh, kw) order."""
    x = np.arange(2 * 2 * 3 * 3, dtype=float).reshape(2, 2, 3, 3)
    text = 'type: "Im2col" convolution_param { kernel_size: 2 pad: 1 stride: 2 }'
    y, = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 8, 2, 2)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for c in range(2):
        for i in range(2):
            for j in range(2):
                np.testing.assert_array_equal(y[:, c * 4 + i * 2 + j], xp[:, c, i::2, j::2][:, :2, :2])
    check_layer_gradient(make_layer('type: "Im2col" convolution_param { kernel_size: 3 pad: 1 '
                                    'dilation: 2 }'), make_blobs([x[:, :, :3, :3] * 0.1 + 1]),
                         make_blobs(1))


def test_dilation_zero_reads_one_position_per_window():
    """BVLC takes ``dilation: 0`` (no check; UberNet's 1x1 score layers set it): the kernel
    extent is 1, every tap reads the window's first position, so the convolution is the 1x1
    convolution by the sum of the taps."""
    x = np.random.default_rng(1).standard_normal((2, 4, 7, 6))
    layer = make_layer(CONV % (3, "kernel_size: 3 dilation: 0 stride: 2 pad: 1"), dtype=np.float64)
    (y,) = run_layer(layer, make_blobs([x], np.float64), make_blobs(1, np.float64))
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    ref = np.einsum("nchw,mc->nmhw", xp[:, :, 0:10:2, 0:8:2], layer.blobs[0].data.sum(axis=(2, 3)))
    np.testing.assert_allclose(y, ref + layer.blobs[1].data.reshape(1, -1, 1, 1), atol=1e-12)


# Kernels that overhang the padded input by less than the stride: Caffe's output size
# (in + 2 pad - extent) / stride + 1 divides toward zero, so such an axis has one output, whose
# taps past the input read zeros (im2col_cpu's bounds test).
OVERHANG = [
    ((2, 3, 2, 2), "kernel_size: 3 stride: 2", (1, 1)),
    ((2, 3, 2, 5), "kernel_h: 3 kernel_w: 4 stride: 2 pad_w: 1", (1, 2)),
    ((2, 2, 3, 4), "kernel_size: 3 dilation: 2 stride: 3 pad: 1", (1, 1)),
    ((1, 2, 2, 3, 4), "kernel_size: 3 stride: 2", (1, 1, 1)),
    ((2, 3, 3), "kernel_size: 5 stride: 3", (1,)),
]


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,fields,out", OVERHANG)
def test_convolution_past_the_input_matches_direct_loops(shape, fields, out, dtype, numba):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    layer = make_layer(CONV % (4, fields), dtype=dtype)
    with contextlib.ExitStack() as stack:
        if not numba:
            stack.enter_context(kernels.disabled())
        bottom, top = make_blobs([x], dtype), make_blobs(1, dtype)
        layer.setup(bottom, top)
        layer.forward(bottom, top)
        assert top[0].shape == shape[:1] + (4,) + out
        w, b = (blob.data.astype(np.float64) for blob in layer.blobs)
        tol = 1e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(top[0].data, naive_conv(x, w, b, layer.stride, layer.pad,
                                                           layer.dilation, 1), rtol=tol, atol=tol)
        dy = rng.standard_normal(top[0].shape)
        top[0].diff[...] = dy
        layer.backward(top, [True], bottom)
    dx, dw, db = naive_conv_backward(x, w, dy, layer.stride, layer.pad, layer.dilation)
    for got, want in ((bottom[0].diff, dx), (layer.blobs[0].diff, dw), (layer.blobs[1].diff, db)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,fields,out", OVERHANG)
def test_convolution_past_the_input_gradient(shape, fields, out):
    x = np.random.default_rng(8).standard_normal(shape)
    check_layer_gradient(make_layer(CONV % (3, fields)), make_blobs([x]), make_blobs(1))


def test_depthwise_and_im2col_past_the_input():
    """The direct depthwise kernel and the Im2col layer at a kernel past the input."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 2, 5))
    fields = "kernel_h: 3 kernel_w: 4 stride: 2 pad_w: 1 group: 3"
    layer = make_layer(CONV % (3, fields))
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    ref = sum(naive_conv(x[:, c:c + 1], layer.blobs[0].data[c:c + 1], None, layer.stride,
                         layer.pad, layer.dilation, 1) * (np.arange(3) == c).reshape(1, 3, 1, 1)
              for c in range(3)) + layer.blobs[1].data.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(y, ref, atol=1e-12)
    check_layer_gradient(make_layer(CONV % (3, fields)), make_blobs([x]), make_blobs(1))
    text = 'type: "Im2col" convolution_param { kernel_size: 3 stride: 2 }'
    (col,) = run_layer(make_layer(text), make_blobs([x[:, :, :, :2]]), make_blobs(1))
    assert col.shape == (2, 27, 1, 1)
    want = np.zeros((2, 3, 3, 3))
    want[:, :, :2, :2] = x[:, :, :, :2]
    np.testing.assert_array_equal(col.reshape(2, 3, 3, 3), want)
