import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

RNG = np.random.default_rng(0)


def correlation_ref(f1, f2, pad, k, d, s1, s2):
    """FlowNet 2's CorrelateData kernel as plain loops."""
    p1 = np.pad(f1, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    p2 = np.pad(f2, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    N, C, PH, PW = p1.shape
    border = d + (k - 1) // 2
    oh, ow = int(np.ceil((PH - 2 * border) / s1)), int(np.ceil((PW - 2 * border) / s1))
    r = d // s2
    g = 2 * r + 1
    y = np.zeros((N, g * g, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y1, x1 = i * s1 + d, j * s1 + d
            for t in range(g * g):
                ox, oy = (t % g - r) * s2, (t // g - r) * s2
                a = p1[:, :, y1:y1 + k, x1:x1 + k]
                b = p2[:, :, y1 + oy:y1 + oy + k, x1 + ox:x1 + ox + k]
                y[:, t, i, j] = (a * b).sum(axis=(1, 2, 3)) / (k * k * C)
    return y


@pytest.mark.parametrize("pad,k,d,s1,s2", [(2, 1, 2, 1, 1), (3, 3, 2, 2, 2), (0, 1, 1, 1, 1)])
def test_correlation_numbers_and_gradient(pad, k, d, s1, s2):
    f1, f2 = RNG.standard_normal((2, 3, 5, 6)), RNG.standard_normal((2, 3, 5, 6))
    text = ('type: "Correlation" correlation_param { pad: %d kernel_size: %d max_displacement: %d '
            'stride_1: %d stride_2: %d }' % (pad, k, d, s1, s2))
    (y,) = run_layer(make_layer(text), make_blobs([f1, f2]), make_blobs(1))
    np.testing.assert_allclose(y, correlation_ref(f1, f2, pad, k, d, s1, s2), rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([f1, f2]), make_blobs(1))


def test_correlation_refuses_what_it_lacks():
    with pytest.raises(NetError, match="multiplicative"):
        make_layer('type: "Correlation" correlation_param { kernel_size: 1 max_displacement: 1 '
                   'correlation_type: SUBTRACT }').setup(make_blobs([np.ones((1, 1, 4, 4))] * 2),
                                                          make_blobs(1))


def test_channel_norm():
    x = RNG.standard_normal((2, 3, 4, 5))
    layer = make_layer('type: "ChannelNorm"')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, np.linalg.norm(x, axis=1, keepdims=True))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_flow_warp_numbers_and_gradient():
    img = RNG.standard_normal((1, 2, 4, 5))
    flow = np.zeros((1, 2, 4, 5))
    flow[:, 0] = 1.0          # read one pixel to the right
    flow[:, 1, 0, 0] = 0.5    # and half a row down at (0, 0)
    (y,) = run_layer(make_layer('type: "FlowWarp"'), make_blobs([img, flow]), make_blobs(1))
    np.testing.assert_allclose(y[:, :, 1:, :4], img[:, :, 1:, 1:])
    np.testing.assert_allclose(y[:, :, :, 4], 0)                        # x + 1 = 5: outside
    np.testing.assert_allclose(y[:, :, 0, 0], 0.5 * img[:, :, 0, 1] + 0.5 * img[:, :, 1, 1])
    (z,) = run_layer(make_layer('type: "FlowWarp" flow_warp_param { fill_value: NOT_A_NUMBER }'),
                     make_blobs([img, flow]), make_blobs(1))
    assert np.isnan(z[:, :, :, 4]).all()
    smooth = RNG.uniform(-1.3, 1.3, (1, 2, 4, 5)) + 0.37  # keep away from integer positions
    check_layer_gradient(make_layer('type: "FlowWarp"'), make_blobs([img, smooth]),
                         make_blobs(1))


def test_resample_nearest_and_linear():
    x = np.arange(16, dtype=float).reshape(1, 1, 4, 4)
    (y,) = run_layer(make_layer('type: "Resample" resample_param { width: 2 height: 2 '
                                'type: NEAREST }'), make_blobs([x]), make_blobs(1))
    # fx = fy = 2: input coordinate 2 o + 0.5 rounds (half away from zero) to 2 o + 1
    np.testing.assert_allclose(y[0, 0], x[0, 0][[1, 3]][:, [1, 3]])
    (z,) = run_layer(make_layer('type: "Resample" resample_param { width: 8 height: 8 }'),
                     make_blobs([x]), make_blobs(1))
    # upsampling by 2 with the triangle filter: coordinate o / 2 - 0.25, weights 1 - |t - i|
    t = np.arange(8) / 2 - 0.25
    A = np.maximum(0, 1 - np.abs(t[:, None] - np.arange(4)[None]))
    A /= A.sum(1, keepdims=True)
    np.testing.assert_allclose(z[0, 0], A @ x[0, 0] @ A.T)
    (w,) = run_layer(make_layer('type: "Resample" resample_param { width: 2 height: 2 }'),
                     make_blobs([x]), make_blobs(1))
    # antialiased halving: weights 0.5 tri(0.5 (t - i)), t = 2 o + 0.5, radius 4
    t = 2 * np.arange(2) + 0.5
    B = np.maximum(0, 1 - 0.5 * np.abs(t[:, None] - np.arange(4)[None]))
    B /= B.sum(1, keepdims=True)
    np.testing.assert_allclose(w[0, 0], B @ x[0, 0] @ B.T)


def test_downsample_with_nans():
    x = RNG.standard_normal((1, 2, 5, 5))
    x[0, 1, :3, :3] = np.nan
    (y,) = run_layer(make_layer('type: "Downsample" downsample_param { top_height: 3 '
                                'top_width: 3 }'), make_blobs([x]), make_blobs(1))
    # scale 2: output o sits on input 2 o, tent weights 1 - |i - 2o| / 2 over radius 2
    A = np.maximum(0, 1 - np.abs(2 * np.arange(3)[:, None] - np.arange(5)[None]) / 2)
    np.testing.assert_allclose(y[0, 0], (A @ x[0, 0] @ A.T) / (A @ np.ones((5, 5)) @ A.T))
    assert np.isnan(y[0, 1, 0, 0]) and np.isfinite(y[0, 1, 2, 2])


@pytest.mark.parametrize("param", ["", "l2_per_location: true",
                                   "l2_per_location: true l2_prescale_by_channels: true "
                                   "normalize_by_num_entries: true epsilon: 0.5",
                                   "plateau: 0.3"])
def test_l1_loss(param):
    x, y = RNG.standard_normal((2, 2, 3, 3)), RNG.standard_normal((2, 2, 3, 3))
    y[0, 0, 0, 0] = np.nan
    text = 'type: "L1Loss" l1_loss_param { %s }' % param
    (loss,) = run_layer(make_layer(text), make_blobs([x, y]), make_blobs(1))
    d = np.nan_to_num(x - y, nan=0.0)
    valid = ~np.isnan(x - y)
    if "l2_per_location" in param:
        c = 2 if "prescale" in param else 1
        eps = 0.5 if "epsilon" in param else 0.01
        norm = valid.sum() / 2 if "num_entries" in param else 2
        want = np.sqrt((d ** 2).sum(1) / c + eps).sum() / norm
    else:
        keep = valid & (np.abs(d) >= 0.3) if "plateau" in param else valid
        want = np.abs(d[keep]).sum() / 2
    assert np.isclose(loss, want)
    clean = make_blobs([x, np.nan_to_num(y, nan=0.5)])
    check_layer_gradient(make_layer(text), clean, make_blobs(1), kink=0.0, kink_range=0.31)


# A FlowNetC-style net (facts of flownet2's FlowNetC / FlowNet2 deploy and train templates:
# two images, shared-free conv towers, Correlation (pad 20, kernel 1, max_displacement 20,
# stride_2 2 there; shrunk here), conv_redir Concat, Deconvolution refinement, Resample of the
# flow back to the input size, FlowWarp + ChannelNorm brightness error, and in training
# Downsample of the ground truth with L1Loss (l2_per_location) at the predicted resolution.
FLOWNETC = """
name: "flownetc-mini"
layer { name: "img0" type: "Input" top: "img0" input_param { shape { dim: 1 dim: 3 dim: 16 dim: 16 } } }
layer { name: "img1" type: "Input" top: "img1" input_param { shape { dim: 1 dim: 3 dim: 16 dim: 16 } } }
layer { name: "conv1a" type: "Convolution" bottom: "img0" top: "conv1a"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "conv1b" type: "Convolution" bottom: "img1" top: "conv1b"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "relu1a" type: "ReLU" bottom: "conv1a" top: "conv1a" relu_param { negative_slope: 0.1 } }
layer { name: "relu1b" type: "ReLU" bottom: "conv1b" top: "conv1b" relu_param { negative_slope: 0.1 } }
layer { name: "corr" type: "Correlation" bottom: "conv1a" bottom: "conv1b" top: "corr"
  correlation_param { pad: 2 kernel_size: 1 max_displacement: 2 stride_1: 1 stride_2: 2 } }
layer { name: "conv_redir" type: "Convolution" bottom: "conv1a" top: "conv_redir"
  convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "concat" type: "Concat" bottom: "conv_redir" bottom: "corr" top: "blob" }
layer { name: "conv2" type: "Convolution" bottom: "blob" top: "conv2"
  convolution_param { num_output: 6 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "predict_flow2" type: "Convolution" bottom: "conv2" top: "predict_flow2"
  convolution_param { num_output: 2 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "upflow" type: "Deconvolution" bottom: "predict_flow2" top: "upflow"
  convolution_param { num_output: 2 kernel_size: 4 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "flow_full" type: "Resample" bottom: "upflow" bottom: "img0" top: "flow_full"
  resample_param { type: LINEAR } include { phase: TEST } }
layer { name: "warped" type: "FlowWarp" bottom: "img1" bottom: "flow_full" top: "warped"
  include { phase: TEST } }
layer { name: "diff" type: "Eltwise" bottom: "img0" bottom: "warped" top: "diff"
  eltwise_param { operation: SUM coeff: 1 coeff: -1 } include { phase: TEST } }
layer { name: "err" type: "ChannelNorm" bottom: "diff" top: "err" include { phase: TEST } }
layer { name: "gt" type: "Input" top: "gt" input_param { shape { dim: 1 dim: 2 dim: 16 dim: 16 } }
  include { phase: TRAIN } }
layer { name: "gt_down" type: "Downsample" bottom: "gt" bottom: "upflow" top: "gt_down"
  include { phase: TRAIN } }
layer { name: "epe" type: "L1Loss" bottom: "upflow" bottom: "gt_down" top: "epe"
  l1_loss_param { l2_per_location: true } include { phase: TRAIN } }
"""


def test_flownetc_forward_and_train_step():
    net = forward(FLOWNETC)
    assert net.blobs["corr"].shape == (1, 9, 8, 8)
    assert net.blobs["err"].shape == (1, 1, 16, 16) and net.blobs["flow_full"].shape[2:] == (16, 16)
    train_step(FLOWNETC, batch=1)
