"""Gaussian YOLOv3 (MobileNet-YOLO's GaussianYolov3 loss and Yolov3DetectionOutput gaussian_box)."""
import math

import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer

LOSS = ('type: "GaussianYolov3" yolov3_param { num_class: 2 num: 1 biases: [4, 4, 16, 16] '
        'mask: [1] anchors_scale: 8 thresh: 0.9 %s }')


def _case(v=None):
    v = np.zeros((1, 11, 2, 2)) if v is None else v
    labels = np.zeros((1, 1, 2, 5))
    labels[0, 0, 0] = [1, 0.5, 0.9, 0.9, 0.5]      # cell (j, i) = (1, 1); anchor 1 matches once
    return make_blobs([v, labels])


def _box_deltas(mean, sigma, target, scale, n=0.25):
    """The fork's per-coordinate (mean, sigma) deltas, written out."""
    z = (target - mean) / sigma
    g = math.exp(-z * z / 2) / (math.sqrt(2 * math.pi) * (sigma + 0.3))
    c = 0.5 * g / (g + 1e-9) * scale
    return -n * c * z / sigma, -n * c * (z * z / sigma - 1 / (sigma + 0.3))


def test_gaussian_yolov3_loss_hand_case():
    layer = make_layer(LOSS % "")
    bottom, top = _case(), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    scale = 5.0 * (2 - 0.45)
    # targets: tx = 0.5 * 2 - 1, ty = 0.9 * 2 - 1, tw = log(0.9 * 16 / 16), th = log(0.5);
    # means sigmoid(0) = 0.5 for x, y and raw 0 for w, h; every sigma sigmoid(0) = 0.5
    want = []
    for mean, target in ((0.5, 0.0), (0.5, 0.8), (0.0, math.log(0.9)), (0.0, math.log(0.5))):
        want.extend(_box_deltas(mean, 0.5, target, scale))
    D = layer.delta[0, 0, :, 1, 1]
    np.testing.assert_allclose(D[:8], want, rtol=1e-9)
    np.testing.assert_allclose(D[8:], [-0.5, 0.5, -0.5], rtol=1e-12)    # objectness, classes
    np.testing.assert_allclose(layer.delta[0, 0, 8, 0, 0], 0.5)
    iou = 0.35 / 1.1                              # prediction (0.75, 0.75) 1 x 1 vs the truth
    np.testing.assert_allclose(loss, 3 * 0.25 + 0.25 + 0.5 + 0.25 * (1 - iou), rtol=1e-9)
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff[0, :, 1, 1], 2.0 * D, rtol=1e-12)


def test_gaussian_box_deltas_are_the_nll_gradient():
    """(mean, sigma) deltas are n scale / 2 times the gradient of the fork's Gaussian negative
    log likelihood z^2 / 2 + log(sigma + 0.3), z = (t - mean) / sigma (central differences)."""
    rng = np.random.default_rng(0)
    v = 0.5 * rng.standard_normal((1, 11, 2, 2))
    layer = make_layer(LOSS % "max_delta: 1000")
    run_layer(layer, _case(v), make_blobs(1))
    s = 1 / (1 + np.exp(-v[0, :, 1, 1]))
    scale = 5.0 * (2 - 0.45)
    targets = (0.0, 0.8, math.log(0.9), math.log(0.5))

    def nll(mean, sigma, t):
        return ((t - mean) / sigma) ** 2 / 2 + math.log(sigma + 0.3)
    for q, t in enumerate(targets):
        mean = v[0, 2 * q, 1, 1] if q >= 2 else s[2 * q]
        sigma, h = s[2 * q + 1], 1e-6
        d_mean = (nll(mean + h, sigma, t) - nll(mean - h, sigma, t)) / (2 * h)
        d_sigma = (nll(mean, sigma + h, t) - nll(mean, sigma - h, t)) / (2 * h)
        np.testing.assert_allclose(layer.delta[0, 0, 2 * q:2 * q + 2, 1, 1],
                                   0.25 * scale / 2 * np.array([d_mean, d_sigma]), rtol=1e-6)


def test_gaussian_detection_output_hand_case():
    v = np.full((1, 11, 1, 1), -30.0)
    v[0, :, 0, 0] = [0.0, 0.0, 0.0, 0.0, math.log(2.0), 0.0, 0.0, 0.0, 30.0, -30.0, 30.0]
    layer = make_layer('type: "Yolov3DetectionOutput" yolov3_detection_output_param { '
                       'num_classes: 2 num_box: 1 confidence_threshold: 0.1 biases: [8, 8] '
                       'anchors_scale: [16] mask_group_num: 1 mask: [0] gaussian_box: true }')
    (out,) = run_layer(layer, make_blobs([v]), make_blobs(1))
    # objectness 1, sigmas 0.5: u = 4 - 2 (0.5) - 3 (0.5) = 1.5 (the fork counts sigma_x twice)
    w, h = 2 * 8 / 16.0, 8 / 16.0
    np.testing.assert_allclose(out[0, 0], [[0, 2, 1.5 / 4, 0.5 - w / 2, 0.5 - h / 2,
                                            0.5 + w / 2, 0.5 + h / 2]], rtol=1e-9, atol=1e-12)


def test_tiny_gaussian_yolov3_one_training_step():
    from caffepy.net import Net
    from caffepy import common
    common.set_random_seed(0)               # the weights' fillers (decreases for seeds 0-7 too)
    net = Net('''name: "tiny_gaussian_yolov3"
    layer { name: "data" type: "Input" top: "data" top: "label"
      input_param { shape { dim: 1 dim: 3 dim: 16 dim: 16 } shape { dim: 1 dim: 1 dim: 4 dim: 5 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
      convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" relu_param { negative_slope: 0.1 } }
    layer { name: "head" type: "Convolution" bottom: "conv" top: "head"
      convolution_param { num_output: 22 kernel_size: 1 weight_filler { type: "gaussian" std: 0.01 } } }
    layer { name: "loss" type: "GaussianYolov3" bottom: "head" bottom: "label" top: "loss"
      yolov3_param { num_class: 2 num: 2 anchors_scale: 2 mask: [0, 1] biases: [4, 4, 10, 12] } }''',
              phase=0)
    net.blobs["data"].data[...] = np.random.default_rng(2).standard_normal((1, 3, 16, 16))
    net.blobs["label"].data[...] = 0
    net.blobs["label"].data[0, 0, 0] = [1, 0.4, 0.6, 0.5, 0.5]
    before = float(net.forward()["loss"])
    net.backward()
    for p in net.learnable_params:
        p.data[...] -= 1e-3 * p.diff
    assert float(net.forward()["loss"]) < before
