"""FlowNet 2's augmentation layers and Correlation1D (lmb-freiburg/flownet2)."""
import math

import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.forks.flownet.augment import (NUM_PARAMS, array_to_coeffs, coeffs_to_array,
                                          transform_matrix)
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

RNG = np.random.default_rng(3)


def coeff_blob(n=1, **values):
    """(n, 42, 1, 1) coefficient array of the fork (log for fields whose default is 1)."""
    c = array_to_coeffs(np.zeros(NUM_PARAMS))
    c.update(values)
    return np.tile(coeffs_to_array(c).reshape(1, NUM_PARAMS, 1, 1), (n, 1, 1, 1))


def test_coefficient_array_and_transform():
    assert NUM_PARAMS == 42
    a = coeffs_to_array(dict(array_to_coeffs(np.zeros(42)), gamma=2.0, dx=0.25))
    assert a[6] == pytest.approx(math.log(2.0)) and a[1] == 0.25 and a[4] == 0  # zoom_x: log 1
    m = transform_matrix(array_to_coeffs(np.zeros(42)), 4, 4, 6, 8)
    np.testing.assert_allclose(m @ [0, 0, 1], [1, 2, 1])        # centre crop offset
    m = transform_matrix(dict(array_to_coeffs(np.zeros(42)), zoom_x=2.0, zoom_y=2.0), 4, 4, 4, 4)
    np.testing.assert_allclose(m @ [0, 0, 1], [1, 1, 1])        # (0 - 2) / 2 + 2


def test_data_augmentation_test_phase_crop_and_recomputed_mean():
    x = RNG.uniform(0, 1, (2, 3, 4, 6))
    text = ('type: "DataAugmentation" augmentation_param { crop_width: 4 crop_height: 4 '
            'recompute_mean: 10 mean_per_pixel: false max_multiplier: 1 '
            'translate { rand_type: "uniform_bernoulli" spread: 0.4 prob: 1 } }')
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    crop = x[:, :, :, 1:5].copy()              # offset (6 - 4) / 2; no random draw in TEST
    crop[:, :, 3] = 0.05 * x[:, :, 2, 1:5] + 0.95 * x[:, :, 3, 1:5]   # y = 3 clamped to 2.95
    mean = crop.mean(axis=(0, 2, 3)).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(y, crop - mean, rtol=1e-6, atol=1e-7)
    assert layer.blobs[0].data.flat[0] == 1
    np.testing.assert_allclose(layer.blobs[2].data, mean)
    # no crop size: a copy; the last row / column rule of the fork's clamp with a full-size crop
    (z,) = run_layer(make_layer('type: "DataAugmentation" augmentation_param { crop_width: 6 '
                                'crop_height: 4 }'), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(z[:, :, :3, :5], x[:, :, :3, :5])
    np.testing.assert_allclose(z[:, :, 0, 5], 0.05 * x[:, :, 0, 4] + 0.95 * x[:, :, 0, 5],
                               rtol=1e-6)
    (c,) = run_layer(make_layer('type: "DataAugmentation" augmentation_param { mean: 0.1 '
                                'mean: 0.2 mean: 0.3 mean_per_pixel: false }'),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(c, x - np.array([0.1, 0.2, 0.3]).reshape(1, 3, 1, 1), atol=1e-7)


def test_data_augmentation_given_coefficients():
    x = RNG.uniform(0.05, 0.95, (1, 3, 4, 5))
    layer = 'type: "DataAugmentation" augmentation_param { crop_width: 5 crop_height: 4 }'
    (y, p) = run_layer(make_layer(layer), make_blobs([x, coeff_blob(mirror=1.0)]), make_blobs(2))
    np.testing.assert_allclose(y[..., :3, 2], x[..., :3, 3])     # the fork maps x to W - x
    np.testing.assert_allclose(p, coeff_blob(mirror=1.0))
    g, b, k, col = 2.0, 0.1, 1.5, (1.2, 1.0, 0.8)
    cb = coeff_blob(gamma=g, brightness=b, contrast=k, color1=col[0], color2=col[1], color3=col[2])
    (y,) = run_layer(make_layer(layer), make_blobs([x, cb]), make_blobs(1))
    want = x[0, :, :3, :4] * np.array(col).reshape(3, 1, 1)
    want = want * x[0, :, :3, :4].sum(0) / (want.sum(0) + 0.01)
    want = 0.5 + (np.clip(want, 0, 1) ** g + b - 0.5) * k
    np.testing.assert_allclose(y[0, :, :3, :4], np.clip(want, 0, 255), rtol=1e-5)


def test_chromatic_eigen_with_identity_basis():
    x = RNG.uniform(0.1, 0.9, (1, 3, 3, 3))
    text = ('type: "DataAugmentation" augmentation_param { crop_width: 3 crop_height: 3 '
            'max_multiplier: 1 %s }' % " ".join("chromatic_eigvec: %g" % v for v in np.eye(3).ravel()))
    (y,) = run_layer(make_layer(text), make_blobs([x, coeff_blob(mult_nomean0=2.0)]),
                     make_blobs(1))
    # identity basis, only mult_nomean0 = 2: channel 0 -> 2 (r - mean) + mean, capped at the
    # largest |value|, clipped to [0, 1]; lightness rescaling restores the same length
    m = x[0, 0].mean()
    xs = x[0, :, :2, :2]                         # away from the fork's last-row / -column rule
    want0 = np.minimum(2 * (xs[0] - m) + m, np.abs(x[0, 0]).max())
    np.testing.assert_allclose(y[0, 0, :2, :2], np.clip(want0, 0, 1), rtol=1e-5)
    np.testing.assert_allclose(y[0, 1:, :2, :2], xs[1:], rtol=1e-5)


def test_train_draws_are_consistent_with_given_coefficients():
    caffepy.set_random_seed(5)
    x = RNG.uniform(0, 1, (2, 3, 8, 10))
    text = ('type: "DataAugmentation" augmentation_param { crop_width: 6 crop_height: 5 '
            'max_multiplier: 1 mirror { rand_type: "bernoulli" prob: 0.5 } '
            'translate { rand_type: "uniform_bernoulli" mean: 0 spread: 0.2 prob: 1 } '
            'rotate { rand_type: "uniform_bernoulli" spread: 0.1 prob: 1 } '
            'gamma { rand_type: "gaussian_bernoulli" spread: 0.02 prob: 1 exp: true } '
            'color { rand_type: "uniform_bernoulli" spread: 0.1 prob: 1 exp: true } }')
    (y, p) = run_layer(make_layer(text, phase=caffe_pb2.TRAIN), make_blobs([x]), make_blobs(2))
    assert np.any(p[:, 1] != 0) and np.any(p[:, 6] != 0)          # dx and log gamma drawn
    (z,) = run_layer(make_layer('type: "DataAugmentation" augmentation_param { crop_width: 6 '
                                'crop_height: 5 max_multiplier: 1 }'),
                     make_blobs([x, p]), make_blobs(1))
    np.testing.assert_allclose(y, z)
    # every corner of each drawn crop lies inside the input (generate_valid_spatial_coeffs)
    for i in range(2):
        m = transform_matrix(array_to_coeffs(p[i].ravel()), 6, 5, 10, 8)
        corners = m @ np.array([[0, 5, 0, 5], [0, 0, 4, 4], [1, 1, 1, 1]])
        assert np.all(np.floor(corners[:2]) >= 0) and np.all(np.floor(corners[0]) <= 8)


def test_generate_augmentation_parameters():
    base = coeff_blob(2, dx=0.1)
    text = ('type: "GenerateAugmentationParameters" augmentation_param { crop_width: 4 '
            'crop_height: 4 bottomwidth: 8 bottomheight: 8 '
            'translate { rand_type: "uniform_bernoulli" spread: 0.05 prob: 1 } '
            'brightness { rand_type: "gaussian_bernoulli" spread: 0.1 prob: 1 } }')
    (same,) = run_layer(make_layer(text), make_blobs([base]), make_blobs(1))
    np.testing.assert_allclose(same, base)                       # TEST: nothing drawn
    caffepy.set_random_seed(1)
    (p,) = run_layer(make_layer(text, phase=caffe_pb2.TRAIN), make_blobs([base]), make_blobs(1))
    assert np.all(np.abs(p[:, 1] - 0.1) <= 0.05 + 1e-7) and np.all(p[:, 1] != 0.1)
    assert np.all(p[:, 7] != 0)                                   # brightness added
    np.testing.assert_allclose(p[:, 12:], base[:, 12:])


def test_flow_augmentation():
    flow = RNG.standard_normal((1, 2, 6, 8))
    text = 'type: "FlowAugmentation" augmentation_param { crop_width: 4 crop_height: 4 }'
    (y,) = run_layer(make_layer(text), make_blobs([flow, coeff_blob(), coeff_blob()]),
                     make_blobs(1))
    np.testing.assert_allclose(y, flow[:, :, 1:5, 2:6], rtol=1e-6)
    # image 2 moved by dx = 0.25 (of the crop width, 1 pixel): its position p2 = p1 + f - 1
    (z,) = run_layer(make_layer(text), make_blobs([flow, coeff_blob(), coeff_blob(dx=0.25)]),
                     make_blobs(1))
    want = flow[:, :, 1:5, 2:6].copy()
    want[:, 0] -= 1.0
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)


def correlation1d_ref(f1, f2, pad, k, d, s1, s2, direction):
    p1 = np.pad(f1, [(0, 0), (0, 0), (0, 0), (pad, pad)])
    p2 = np.pad(f2, [(0, 0), (0, 0), (0, 0), (pad, pad)])
    N, C, H, PW = p1.shape
    kr, r = (k - 1) // 2, d // s2
    oh, ow = int(np.ceil((H - 2 * kr) / s1)), int(np.ceil((PW - 2 * (d + kr)) / s1))
    offs = {0: range(-r, r + 1), 1: range(0, r + 1)}[direction]
    y = np.zeros((N, len(offs), oh, ow))
    for i in range(oh):
        for j in range(ow):
            y1, x1 = i * s1, j * s1 + d
            for t, o in enumerate(offs):
                a = p1[:, :, y1:y1 + k, x1:x1 + k]
                b = p2[:, :, y1:y1 + k, x1 + o * s2:x1 + o * s2 + k]
                y[:, t, i, j] = (a * b).sum(axis=(1, 2, 3)) / (k * k * C)
    return y


@pytest.mark.parametrize("pad,k,d,s1,s2,direction", [(2, 1, 2, 1, 1, 0), (2, 3, 2, 2, 1, 1)])
def test_correlation1d_numbers_and_gradient(pad, k, d, s1, s2, direction):
    f1, f2 = RNG.standard_normal((1, 2, 4, 6)), RNG.standard_normal((1, 2, 4, 6))
    text = ('type: "Correlation1D" correlation_param { pad: %d kernel_size: %d '
            'max_displacement: %d stride_1: %d stride_2: %d single_direction: %d }'
            % (pad, k, d, s1, s2, direction))
    (y,) = run_layer(make_layer(text), make_blobs([f1, f2]), make_blobs(1))
    np.testing.assert_allclose(y, correlation1d_ref(f1, f2, pad, k, d, s1, s2, direction),
                               rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([f1, f2]), make_blobs(1))


def test_augmentation_errors():
    with pytest.raises(NetError, match="crop_width and crop_height"):
        make_layer('type: "FlowAugmentation"').setup(
            make_blobs([np.zeros((1, 2, 4, 4)), coeff_blob(), coeff_blob()]), make_blobs(1))
    with pytest.raises(NetError, match="larger than the input"):
        make_layer('type: "DataAugmentation" augmentation_param { crop_width: 9 crop_height: 2 }'
                   ).setup(make_blobs([np.zeros((1, 3, 4, 4))]), make_blobs(1))


# A FlowNet 2-style training front end and FlowNetS body, from the facts of flownet2's
# FlowNet2 / FlowNetS train templates: images scaled by 1/255 with Eltwise, DataAugmentation of
# image 0 with a crop, recomputed per-channel mean and the fork's generators (its values: translate
# uniform_bernoulli spread 0.4, rotate 0.4, zoom 0.2 exp, gamma / brightness / contrast / color
# gaussian / uniform with exp, noise), GenerateAugmentationParameters for image 1 relative to
# image 0, DataAugmentation of image 1 with those, FlowAugmentation of the ground truth, Concat,
# strided convolutions, a flow prediction with Downsample of the ground truth and L1Loss
# (l2_per_location, normalize_by_num_entries). The deploy file keeps the scaling and the
# augmentation layers without random fields; TEST runs that path.
FLOWNET2_FRONT = """
name: "flownet2-front"
layer { name: "img0" type: "Input" top: "img0" input_param { shape { dim: 1 dim: 3 dim: 20 dim: 24 } } }
layer { name: "img1" type: "Input" top: "img1" input_param { shape { dim: 1 dim: 3 dim: 20 dim: 24 } } }
layer { name: "flow_gt" type: "Input" top: "flow_gt" input_param { shape { dim: 1 dim: 2 dim: 20 dim: 24 } }
  include { phase: TRAIN } }
layer { name: "img0s" type: "Eltwise" bottom: "img0" top: "img0s" eltwise_param { operation: SUM coeff: 0.0039215686 } }
layer { name: "img1s" type: "Eltwise" bottom: "img1" top: "img1s" eltwise_param { operation: SUM coeff: 0.0039215686 } }
layer { name: "img0_aug" type: "DataAugmentation" bottom: "img0s" top: "img0_aug" top: "aug_params0"
  propagate_down: false
  augmentation_param { max_multiplier: 1 augment_during_test: false recompute_mean: 1000
    mean_per_pixel: false crop_width: 16 crop_height: 16
    translate { rand_type: "uniform_bernoulli" exp: false mean: 0 spread: 0.1 prob: 1.0 }
    rotate { rand_type: "uniform_bernoulli" exp: false mean: 0 spread: 0.1 prob: 1.0 }
    zoom { rand_type: "uniform_bernoulli" exp: true mean: 0.1 spread: 0.1 prob: 1.0 }
    gamma { rand_type: "gaussian_bernoulli" exp: true mean: 0 spread: 0.02 prob: 1.0 }
    brightness { rand_type: "gaussian_bernoulli" exp: false mean: 0 spread: 0.02 prob: 1.0 }
    contrast { rand_type: "gaussian_bernoulli" exp: true mean: 0 spread: 0.02 prob: 1.0 }
    color { rand_type: "gaussian_bernoulli" exp: true mean: 0 spread: 0.02 prob: 1.0 }
    noise { rand_type: "uniform_bernoulli" exp: false mean: 0.01 spread: 0.01 prob: 1.0 } }
  coeff_schedule_param { half_life: 50000 initial_coeff: 0.5 final_coeff: 1 } }
layer { name: "aug_params1" type: "GenerateAugmentationParameters"
  bottom: "aug_params0" bottom: "img0s" bottom: "img0_aug" top: "aug_params1"
  augmentation_param { augment_during_test: false
    translate { rand_type: "gaussian_bernoulli" exp: false mean: 0 spread: 0.01 prob: 1.0 }
    gamma { rand_type: "gaussian_bernoulli" exp: true mean: 0 spread: 0.01 prob: 1.0 } }
  coeff_schedule_param { half_life: 50000 initial_coeff: 0.5 final_coeff: 1 } }
layer { name: "img1_aug" type: "DataAugmentation" bottom: "img1s" bottom: "aug_params1" top: "img1_aug"
  propagate_down: false propagate_down: false
  augmentation_param { max_multiplier: 1 augment_during_test: false recompute_mean: 1000
    mean_per_pixel: false crop_width: 16 crop_height: 16 } }
layer { name: "flow_aug" type: "FlowAugmentation" bottom: "flow_gt" bottom: "aug_params0"
  bottom: "aug_params1" top: "flow_aug" augmentation_param { crop_width: 16 crop_height: 16 }
  include { phase: TRAIN } }
layer { name: "concat" type: "Concat" bottom: "img0_aug" bottom: "img1_aug" top: "input" }
layer { name: "conv1" type: "Convolution" bottom: "input" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.1 } }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "predict_flow" type: "Convolution" bottom: "conv2" top: "predict_flow"
  convolution_param { num_output: 2 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "flow_down" type: "Downsample" bottom: "flow_aug" bottom: "predict_flow" top: "flow_down"
  propagate_down: false propagate_down: false include { phase: TRAIN } }
layer { name: "loss" type: "L1Loss" bottom: "predict_flow" bottom: "flow_down" top: "loss"
  l1_loss_param { l2_per_location: true normalize_by_num_entries: true } include { phase: TRAIN } }
"""


def test_flownet2_front_forward_and_train_step():
    net = forward(FLOWNET2_FRONT)
    assert net.blobs["img0_aug"].shape == (1, 3, 16, 16)
    assert net.blobs["predict_flow"].shape == (1, 2, 4, 4)
    # TEST: a centre crop of the scaled image minus its per-channel mean
    crop = net.blobs["img0s"].data[:, :, 2:18, 4:20]
    np.testing.assert_allclose(net.blobs["img0_aug"].data,
                               crop - crop.mean(axis=(2, 3), keepdims=True), rtol=1e-4, atol=1e-6)
    loss, change = train_step(FLOWNET2_FRONT, batch=1)
    assert loss >= 0 and change > 0


@pytest.mark.parametrize("param,shapes,out", [
    ("", [(1, 2, 3, 4), (1, 1, 5, 7)], (1, 3, 5, 7)),
    ("have_reference: true", [(1, 2, 3, 4), (1, 1, 6, 5)], (1, 2, 6, 5)),
    ("size_divisible_by: 4", [(1, 1, 3, 5)], (1, 1, 4, 8))])
def test_accum_numbers_and_gradient(param, shapes, out):
    xs = [RNG.standard_normal(s) for s in shapes]
    text = 'type: "Accum" accum_param { %s }' % param
    (y,) = run_layer(make_layer(text), make_blobs(xs), make_blobs(1))
    assert y.shape == out
    # corners aligned: output o at input o (n - 1) / (n' - 1), bilinear
    def interp(n_out, n_in):
        t = np.arange(n_out) * (n_in - 1) / max(n_out - 1, 1)
        return np.maximum(0, 1 - np.abs(t[:, None] - np.arange(n_in)[None]))
    a = xs[0][0]
    want = interp(out[2], a.shape[1]) @ a @ interp(out[3], a.shape[2]).T
    np.testing.assert_allclose(y[0, :a.shape[0]], want, rtol=1e-5, atol=1e-6)   # float32 positions
    check_layer_gradient(make_layer(text), make_blobs(xs), make_blobs(1),
                         check_bottom=[0] if "reference" in param else None)


def test_diagonal_filler():
    from caffepy.blob import Blob
    from caffepy.fillers import fill
    fp = caffe_pb2.FillerParameter(type="diagonal", diag_val=[1.0, 0.75])
    b = Blob((3, 3, 2, 2), dtype=np.float64)
    fill(b, fp)
    want = np.zeros((3, 3, 2, 2))
    want[0, 0], want[1, 1], want[2, 2] = 1.0 / 4, 0.75 / 4, 1.0 / 4   # 1 past diag_val's end
    np.testing.assert_array_equal(b.data, want)


def test_neg_relu_and_mean(tmp_path):
    x = RNG.standard_normal((2, 3, 2, 2))
    text = 'type: "NegReLU" relu_param { negative_slope: 0.1 }'
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, np.minimum(x, 0) + 0.1 * np.maximum(x, 0))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1), kink=0.0,
                         kink_range=1e-3)
    text = ('type: "Mean" mean_param { operation: SUBTRACT value: 1 value: 2 value: 3 '
            'input_scale: 2 mean_scale: 0.5 output_scale: 3 }')
    (m,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(m, 3 * (2 * x - 0.5 * np.array([1, 2, 3.]).reshape(1, 3, 1, 1)))
    plane = RNG.standard_normal((1, 1, 2, 2))
    bp = caffe_pb2.BlobProto()
    bp.shape.dim.extend(plane.shape)
    bp.data.extend(plane.ravel())
    (tmp_path / "mean.binaryproto").write_bytes(bp.SerializeToString())
    text = 'type: "Mean" mean_param { operation: ADD file: "%s" }' % (tmp_path / "mean.binaryproto")
    (m,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(m, x + plane, rtol=1e-6)     # the one plane for every channel


def test_black_augmentation():
    img0, img1 = RNG.uniform(0, 1, (2, 3, 4, 6)), RNG.uniform(0, 1, (2, 3, 4, 6))
    flow = RNG.standard_normal((2, 2, 4, 6))
    black = ('type: "BlackAugmentation" black_augmentation_param { black { rand_type: "bernoulli" '
             'prob: 1 } }')
    a, b, f = run_layer(make_layer(black), make_blobs([img0, img1, flow]), make_blobs(3))
    np.testing.assert_array_equal(a, img1)          # both images become the last image
    np.testing.assert_array_equal(b, img1)
    np.testing.assert_array_equal(f, 0)             # and the flow 0
    border = ('type: "BlackAugmentation" black_augmentation_param { border { rand_type: '
              '"uniform" mean: 0.25 } }')
    caffepy.set_random_seed(2)
    a, f = run_layer(make_layer(border), make_blobs([img0, flow]), make_blobs(2))
    for n in range(2):
        kept = a[n, 0] != 0
        rows, cols = np.where(kept.any(1))[0], np.where(kept.any(0))[0]
        # int(0.25 W) = 1 column and / or int(0.25 H) = 1 row zeroed on both sides
        assert (rows.min(), rows.max()) in ((0, 3), (1, 2)) and (cols.min(), cols.max()) in (
            (0, 5), (1, 4))
        assert (rows.min(), cols.min()) != (0, 0)
        np.testing.assert_array_equal(a[n][:, kept], img0[n][:, kept])
        np.testing.assert_array_equal(f[n][:, ~kept], 0)


@pytest.mark.parametrize("param", ["p: 1 q: 0.4", "p: 2 q: 0.5 l2_prescale_by_channels: true "
                                   "normalize_by_num_entries: true p_epsilon: 0.1"])
def test_lpq_loss(param):
    x, y = RNG.standard_normal((2, 2, 3, 3)), RNG.standard_normal((2, 2, 3, 3))
    y[1, 0, 2, 2] = np.nan
    text = 'type: "LpqLoss" lpq_loss_param { %s }' % param
    (loss,) = run_layer(make_layer(text), make_blobs([x, y]), make_blobs(1))
    d = np.nan_to_num(x - y, nan=0.0)
    if param.startswith("p: 1"):
        want = ((np.abs(d).sum(1) + 0.01) ** 0.4).sum() / 2
    else:
        valid = (~np.isnan(x - y)).sum() / 2
        want = ((((np.abs(d) + 0.1) ** 2).sum(1) / 2 + 0.01) ** 0.5).sum() / valid
    assert np.isclose(loss, want)
    clean = make_blobs([x, np.nan_to_num(y, nan=0.5)])
    check_layer_gradient(make_layer(text), clean, make_blobs(1), kink=0.0, kink_range=0.02)


def test_lpq_loss_schedule():
    layer = make_layer('type: "LpqLoss" lpq_loss_param { pq_episode_starts_at_iter: 0 '
                       'pq_episode_starts_at_iter: 2 p: 1 p: 2 q: 1 q: 1 q_epsilon: 0 }',
                       phase=caffe_pb2.TRAIN)
    x = np.full((1, 1, 1, 2), 3.0)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    losses = []
    for _ in range(3):
        layer.forward(bottom, top)
        losses.append(float(top[0].data))
    assert losses == [6.0, 6.0, 18.0]         # p = 1 for iterations 0, 1; p = 2 from 2


def test_data_augmentation_adopts_a_mean_of_another_size():
    from caffepy.net.weights import copy_trained_layers
    text = ('name: "n" layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 '
            'dim: 3 dim: 6 dim: 6 } } } layer { name: "aug" type: "DataAugmentation" bottom: "x" '
            'top: "y" augmentation_param { crop_width: 4 crop_height: 4 recompute_mean: 5 } }')
    from caffepy.net import Net
    net = Net(text, caffe_pb2.TEST)
    src = caffe_pb2.NetParameter()
    layer = src.layer.add(name="aug", type="DataAugmentation")
    trained = RNG.uniform(0, 1, (1, 3, 8, 8))
    for arr in (np.array([[[[100.0]]]]), trained, trained.mean(axis=(2, 3), keepdims=True)):
        bp = layer.blobs.add()
        bp.shape.dim.extend(arr.shape)
        bp.data.extend(arr.ravel())
    copy_trained_layers(net, src)
    aug = net.layers[1]
    assert aug.blobs[0].data.flat[0] == 100
    np.testing.assert_allclose(aug.blobs[1].data, np.broadcast_to(
        trained.mean(axis=(2, 3), keepdims=True), (1, 3, 4, 4)), rtol=1e-6)
    net.blobs["x"].data[...] = 1.0
    net.forward()                  # iteration 101 > recompute_mean: the adopted mean is used
    np.testing.assert_allclose(net.blobs["y"].data, 1.0 - aug.blobs[1].data, rtol=1e-6)
