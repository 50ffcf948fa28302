"""YOLO on Caffe (eric612/MobileNet-YOLO): detection outputs, resize_param, a tiny YOLOv3 head."""
import numpy as np
import pytest

from caffepy import common
from caffepy.net import Net
from caffepy.proto import io
from caffepy.testing import make_blobs, make_layer, run_layer


def _logit(p):
    return np.log(p / (1 - p))


def test_yolov3_detection_output_hand_case():
    # one 2 x 2 map, 1 box per cell, 2 classes; anchor 1 of biases (10,14, 20,30), scale 16
    C = 2
    v = np.full((1, 5 + C, 2, 2), -20.0)           # sigmoid ~ 0: nothing passes by default
    # cell (j=1, i=0): tx, ty -> sigmoid 0.5, tw = log 2, th = 0, obj 0.8, class 1 at 0.9
    v[0, :, 1, 0] = [0.0, 0.0, np.log(2.0), 0.0, _logit(0.8), -20.0, _logit(0.9)]
    # cell (j=1, i=1): nearly the same box a little to the right: suppressed by NMS at 0.45
    v[0, :, 1, 1] = [-20.0, 0.0, np.log(2.0), 0.0, _logit(0.7), -20.0, _logit(0.9)]
    layer = make_layer('type: "Yolov3DetectionOutput" yolov3_detection_output_param { '
                       'num_classes: 2 num_box: 1 confidence_threshold: 0.1 nms_threshold: 0.45 '
                       'biases: [10, 14, 20, 30] anchors_scale: [16] mask_group_num: 1 mask: [1] }')
    (out,) = run_layer(layer, make_blobs([v]), make_blobs(1))
    x, y = (0 + 0.5) / 2, (1 + 0.5) / 2
    w, h = 2 * 20 / 32.0, 30 / 32.0
    want = [0, 2, 0.8 * 0.9, x - w / 2, y - h / 2, x + w / 2, y + h / 2]
    assert out.shape == (1, 1, 1, 7)
    np.testing.assert_allclose(out[0, 0, 0], want, rtol=1e-9, atol=1e-7)


def test_yolov3_detection_output_nothing_found_and_two_scales():
    layer = make_layer('type: "Yolov3DetectionOutput" yolov3_detection_output_param { '
                       'num_classes: 1 num_box: 1 biases: [1, 1, 2, 2] anchors_scale: [8, 16] '
                       'mask_group_num: 2 mask: [0, 1] }')
    bottoms = make_blobs([np.full((2, 6, 2, 2), -30.0), np.full((2, 6, 1, 1), -30.0)])
    (out,) = run_layer(layer, bottoms, make_blobs(1))
    np.testing.assert_array_equal(out[0, 0], [[0] + [-1] * 6, [1] + [-1] * 6])


@pytest.mark.parametrize("threshold", [0.45, 0.9, 1.5])
def test_nms_groups_keep_what_the_plain_greedy_pass_keeps(threshold):
    from caffepy.forks.yolo.output import nms_center
    rng = np.random.default_rng(3)
    # 60 boxes, 4 classes each (one group per box), some of zero area, some near-duplicates
    base = np.column_stack([rng.random((60, 2)), rng.random((60, 2)) * 0.3])
    base[::7, 2] = 0.0
    base[1::9] = base[0::9][:len(base[1::9])] + 1e-3
    boxes = np.repeat(base, 4, axis=0)
    groups = np.repeat(np.arange(60), 4)
    scores = np.round(rng.random(len(boxes)), 2)            # ties too
    plain = nms_center(boxes, scores, threshold)
    grouped = nms_center(boxes, scores, threshold, groups)
    np.testing.assert_array_equal(grouped, plain)
    assert (len(plain) < len(boxes)) == (threshold <= 1)      # over 1: no IoU reaches it


def test_yolov3_detection_output_every_candidate_passing_keeps_the_plain_result():
    # an untrained head: every (box, class) score over the threshold
    from caffepy.forks.yolo import output
    rng = np.random.default_rng(0)
    C, B = 5, 3
    layer = make_layer('type: "Yolov3DetectionOutput" yolov3_detection_output_param { '
                       'num_classes: %d num_box: %d confidence_threshold: 0.01 '
                       'nms_threshold: 0.45 biases: [10, 14, 23, 27, 37, 58, 81, 82, 135, 169, '
                       '344, 319] anchors_scale: [32, 16] mask_group_num: 2 '
                       'mask: [3, 4, 5, 0, 1, 2] }' % (C, B))
    maps = [rng.normal(0, 0.5, (1, B * (5 + C), 4, 4)), rng.normal(0, 0.5, (1, B * (5 + C), 8, 8))]
    (out,) = run_layer(layer, make_blobs(maps), make_blobs(1))
    seen = []
    real = output.nms_center

    def plain(boxes, scores, threshold, groups=None):
        seen.append(len(scores))
        return real(boxes, scores, threshold)
    output.nms_center = plain
    try:
        (want,) = run_layer(layer, make_blobs(maps), make_blobs(1))
    finally:
        output.nms_center = real
    assert seen == [(16 + 64) * B * C]
    np.testing.assert_array_equal(out, want)
    assert out.shape[2] > 1


def test_yolo_v2_detection_output_softmax_and_argmax():
    C, B = 3, 2
    t = np.full((1, B * (5 + C), 1, 1), 0.0)
    t[0, 0:8, 0, 0] = [0.0, 0.0, 0.0, np.log(0.5), 2.0, 1.0, 3.0, 0.0]    # box 0
    t[0, 4 + 8, 0, 0] = -30.0                                            # box 1: no object
    layer = make_layer('type: "YoloDetectionOutput" yolo_detection_output_param { '
                       'num_classes: 3 num_box: 2 confidence_threshold: 0.2 '
                       'biases: [1.0, 2.0, 3.0, 4.0] }')
    (out,) = run_layer(layer, make_blobs([t]), make_blobs(1))
    p = np.exp([1.0, 3.0, 0.0]) / np.exp([1.0, 3.0, 0.0]).sum()
    conf = 1 / (1 + np.exp(-2.0)) * p.max()
    w, h = 1.0, 0.5 * 2.0
    np.testing.assert_allclose(out[0, 0], [[0, 2, conf, 0.5 - w / 2, 0.5 - h / 2,
                                            0.5 + w / 2, 0.5 + h / 2]], rtol=1e-9)


def test_repeated_resize_param_loads_first_policy():
    text = '''layer { name: "data" type: "Input" top: "data"
      input_param { shape { dim: 1 dim: 3 dim: 32 dim: 32 } }
      transform_param { resize_param { prob: 0.5 height: 32 width: 32 interp_mode: LINEAR }
                        resize_param { prob: 0.5 height: 32 width: 32 interp_mode: CUBIC } } }'''
    net = io.read_net(text)
    rp = net.layer[0].transform_param.resize_param
    assert (rp.height, list(rp.interp_mode)) == (32, [rp.LINEAR])


TINY_YOLOV3 = """name: "tiny_yolov3_head"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 32 dim: 32 } } }
layer { name: "conv0" type: "Convolution" bottom: "data" top: "conv0"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 bias_term: false
    weight_filler { type: "msra" } } }
layer { name: "bn0" type: "BatchNorm" bottom: "conv0" top: "conv0" }
layer { name: "scale0" type: "Scale" bottom: "conv0" top: "conv0" scale_param { bias_term: true } }
layer { name: "relu0" type: "ReLU" bottom: "conv0" top: "conv0" relu_param { negative_slope: 0.1 } }
layer { name: "conv1" type: "Convolution" bottom: "conv0" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.1 } }
layer { name: "reorg" type: "Reorg" bottom: "conv0" top: "reorg" reorg_param { stride: 2 } }
layer { name: "concat" type: "Concat" bottom: "reorg" bottom: "conv1" top: "concat" }
layer { name: "head_big" type: "Convolution" bottom: "concat" top: "head_big"
  convolution_param { num_output: 21 kernel_size: 1 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "pool" type: "Pooling" bottom: "concat" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "head_small" type: "Convolution" bottom: "pool" top: "head_small"
  convolution_param { num_output: 21 kernel_size: 1 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "label" type: "Input" top: "label" include { phase: TRAIN }
  input_param { shape { dim: 1 dim: 1 dim: 4 dim: 5 } } }
layer { name: "loss_small" type: "Yolov3" bottom: "head_small" bottom: "label" top: "loss_small"
  include { phase: TRAIN }
  yolov3_param { num_class: 2 num: 3 anchors_scale: 16 mask: [3, 4, 5]
    biases: [10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319] } }
layer { name: "loss_big" type: "Yolov3" bottom: "head_big" bottom: "label" top: "loss_big"
  include { phase: TRAIN }
  yolov3_param { num_class: 2 num: 3 anchors_scale: 8 mask: [0, 1, 2]
    biases: [10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319] } }
layer { name: "detection_out" type: "Yolov3DetectionOutput" bottom: "head_small" bottom: "head_big"
  top: "detection_out" include { phase: TEST }
  yolov3_detection_output_param { num_classes: 2 num_box: 3 confidence_threshold: 0.01
    nms_threshold: 0.45 biases: [10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319]
    anchors_scale: [16, 8] mask_group_num: 2 mask: [3, 4, 5, 0, 1, 2] } }
"""


def test_tiny_yolov3_forward_batch_1():
    net = Net(TINY_YOLOV3, phase=1)
    net.blobs["data"].data[...] = np.random.default_rng(0).standard_normal((1, 3, 32, 32))
    out = net.forward()["detection_out"]
    assert out.ndim == 4 and out.shape[-1] == 7 and out.shape[2] >= 1
    kept = out[0, 0]
    assert np.all((kept[:, 1] >= 1) & (kept[:, 1] <= 2)) and np.all(np.diff(kept[:, 2]) <= 0)


YOLOV3_LOSS = ('type: "Yolov3" yolov3_param { num_class: 2 num: 1 biases: [8, 8, 16, 16] mask: [1] '
               'anchors_scale: 8 thresh: 0.9 %s }')


def _yolov3_case():
    v = np.zeros((1, 7, 2, 2))
    labels = np.zeros((1, 1, 2, 5))
    labels[0, 0, 0] = [1, 0.3, 0.7, 0.9, 0.9]      # class 1, centre (0.3, 0.7), 0.9 x 0.9
    return v, labels


def test_yolov3_loss_hand_case():
    v, labels = _yolov3_case()
    layer = make_layer(YOLOV3_LOSS % "")
    bottom, top = make_blobs([v, labels]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    # truth cell (j, i) = (1, 0); anchor 1 (16 x 16 over a 16 px input) matches best and is mask[0]
    c = 5.0 * (2 - 0.81)
    D = np.zeros((7, 2, 2))
    D[4] = 0.5                                      # no object: s4 = 0.5 everywhere ...
    D[:, 1, 0] = [-c * (0.6 - 0.5), -c * (0.4 - 0.5), -c * np.log(0.9), -c * np.log(0.9),
                  -(1 - 0.5), -(0.05 - 0.5), -(0.95 - 0.5)]   # ... but the truth's cell
    np.testing.assert_allclose(layer.delta[0, 0], D, rtol=1e-7)
    np.testing.assert_allclose(loss, np.square(D).sum(), rtol=1e-7)
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff[0], 2.0 * D, rtol=1e-7)


def test_yolov3_backward_is_the_fork_surrogate_gradient():
    """darknet's delta is the gradient of c/2 (v - t)^2 on w, h and c BCE(t, sigmoid v) elsewhere:
    a central difference of that surrogate (targets fixed) matches the layer's backward."""
    rng = np.random.default_rng(3)
    v, labels = _yolov3_case()
    v += 0.3 * rng.standard_normal(v.shape)
    layer = make_layer(YOLOV3_LOSS % "label_smooth_eps: 0")
    bottom, top = make_blobs([v, labels]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    c = 5.0 * (2 - 0.81)
    t = {(0, 1, 0): (0.6, c), (1, 1, 0): (0.4, c), (4, 1, 0): (1.0, 1.0), (5, 1, 0): (0.0, 1.0),
         (6, 1, 0): (1.0, 1.0)}
    raw = {(2, 1, 0): (np.log(0.9), c), (3, 1, 0): (np.log(0.9), c)}

    def surrogate(x):
        total = 0.0
        for (q, j, i), (target, scale) in t.items():
            s = 1 / (1 + np.exp(-x[q, j, i]))
            total -= scale * (target * np.log(s) + (1 - target) * np.log(1 - s))
        for (q, j, i), (target, scale) in raw.items():
            total += scale / 2 * (x[q, j, i] - target) ** 2
        for j, i in [(0, 0), (0, 1), (1, 1)]:     # no-object cells: BCE towards 0
            total -= np.log(1 - 1 / (1 + np.exp(-x[4, j, i])))
        return total

    x0, h = v[0].copy(), 1e-6
    for idx in list(t) + list(raw) + [(4, 0, 0), (4, 1, 1)]:
        xp, xm = x0.copy(), x0.copy()
        xp[idx] += h
        xm[idx] -= h
        numeric = (surrogate(xp) - surrogate(xm)) / (2 * h)
        np.testing.assert_allclose(bottom[0].diff[0][idx], numeric, rtol=1e-5, atol=1e-8)


def tiny_yolov3_step(prototxt):
    """One SGD step (lr 1e-3) of a seeded tiny YOLOv3 net on one image with two truths:
    (loss before, loss after, the param gradients)."""
    common.set_random_seed(0)       # the weights' fillers: the result must not depend on test order
    net = Net(prototxt, phase=0)
    net.blobs["data"].data[...] = np.random.default_rng(1).standard_normal((1, 3, 32, 32))
    net.blobs["label"].data[...] = 0
    net.blobs["label"].data[0, 0, :2] = [[0, 0.3, 0.4, 0.5, 0.6], [1, 0.7, 0.7, 0.2, 0.3]]

    def total():
        out = net.forward()
        return float(out["loss_small"] + out["loss_big"])

    before = total()
    net.backward()
    grads = [p.diff.copy() for p in net.learnable_params]
    for p, g in zip(net.learnable_params, grads):
        p.data[...] -= 1e-3 * g
    return before, total(), grads


def test_tiny_yolov3_one_training_step():
    before, after, grads = tiny_yolov3_step(TINY_YOLOV3)
    assert any(np.abs(g).sum() > 0 for g in grads)
    assert after < before


REGION = ('type: "RegionLoss" region_loss_param { num_class: 2 num: 1 coords: 4 thresh: 0.9 '
          'biases: [1, 1, 0, 0, 0, 0, 0, 0, 0, 0] %s }')


def test_region_loss_hand_case():
    v = np.zeros((1, 7, 2, 2))
    labels = np.zeros((1, 2, 5))
    labels[0, 0] = [0, 0.3, 0.7, 0.5, 0.5]
    layer = make_layer(REGION % "rescore: 0")
    bottom, top = make_blobs([v, labels]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    D = np.zeros((7, 2, 2))
    D[4] = 0.5 * 0.5 * 0.5 * 0.5                   # noobject_scale o o (1 - o)
    c = 5.0 * (2 - 0.25)
    D[:, 1, 0] = [-c * 0.1 * 0.25, c * 0.1 * 0.25, 0.0, 0.0, -0.5 * 0.25, -0.5, 0.5]
    np.testing.assert_allclose(layer.delta[0, 0], D, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(loss, np.square(D).sum(), rtol=1e-7)


def test_region_loss_backward_is_the_surrogate_gradient():
    rng = np.random.default_rng(4)
    v = 0.3 * rng.standard_normal((1, 7, 2, 2))
    labels = np.zeros((1, 2, 5))
    labels[0, 0] = [1, 0.3, 0.7, 0.5, 0.5]
    layer = make_layer(REGION % "rescore: 0")
    bottom, top = make_blobs([v, labels]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    c = 5.0 * (2 - 0.25)
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731

    def surrogate(x):
        total = 0.5 * sum(0.5 * sig(x[4, j, i]) ** 2 for j, i in [(0, 0), (0, 1), (1, 1)])
        total += c / 2 * ((0.6 - sig(x[0, 1, 0])) ** 2 + (0.4 - sig(x[1, 1, 0])) ** 2
                          + x[2, 1, 0] ** 2 + x[3, 1, 0] ** 2)
        total += 0.5 * (1 - sig(x[4, 1, 0])) ** 2
        z = x[5:, 1, 0]
        total -= z[1] - np.log(np.exp(z).sum())
        return total

    x0, h = v[0].copy(), 1e-6
    for idx in [(q, 1, 0) for q in range(7)] + [(4, 0, 0), (4, 1, 1)]:
        xp, xm = x0.copy(), x0.copy()
        xp[idx] += h
        xm[idx] -= h
        np.testing.assert_allclose(bottom[0].diff[0][idx], (surrogate(xp) - surrogate(xm)) / (2 * h),
                                   rtol=1e-5, atol=1e-8)


def test_yolo_v1_detection_loss_hand_case():
    K, C, B = 4, 2, 2
    x = np.zeros((1, C + 5 * B, K))
    x[0, :C, 1] = [0.2, 0.7]
    x[0, C:C + B] = 0.5
    x[0, C + B:C + B + 4, 1] = [0.55, 0.3, 0.2, 0.2]      # box 0 of cell 1: IoU 0.6 with the truth
    label = np.zeros((1, 7 * K))
    label[0, K + 1], label[0, 2 * K + 1] = 1, 1
    label[0, 3 * K + 4:3 * K + 8] = [0.6, 0.3, 0.2, 0.2]
    layer = make_layer('type: "DetectionLoss" detection_loss_param { side: 2 num_class: 2 '
                       'num_object: 2 sqrt: false constriant: false }')
    bottom, top = make_blobs([x.reshape(1, -1), label]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    D = np.zeros_like(x[0])
    D[C:C + B] = 0.5 * 0.5
    D[C, 1] = 0.5 - 0.6
    D[:C, 1] = [0.2, -0.3]
    D[C + B, 1] = 5 * (0.55 - 0.6)
    np.testing.assert_allclose(layer.delta[0], D, atol=1e-12)
    want = (0.13 + 5 * 0.05 ** 2 + 0.25) + (8 - 1) * 0.5 * 0.25 / 7
    np.testing.assert_allclose(loss, want, rtol=1e-7)
    top[0].diff[...] = 3.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff.reshape(D.shape), 3.0 * D, atol=1e-12)


TINY_YOLO_V1 = """name: "tiny_yolo_v1"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 1 dim: 3 dim: 16 dim: 16 } shape { dim: 1 dim: 28 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "msra" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.1 } }
layer { name: "fc" type: "InnerProduct" bottom: "conv1" top: "fc"
  inner_product_param { num_output: 48 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "DetectionLoss" bottom: "fc" bottom: "label" top: "loss"
  detection_loss_param { side: 2 num_class: 2 num_object: 2 object_scale: 1 noobject_scale: 0.5
    class_scale: 1 coord_scale: 5 sqrt: true constriant: true } }
"""


def test_tiny_yolo_v1_one_training_step():
    net = Net(TINY_YOLO_V1, phase=0)
    net.blobs["data"].data[...] = np.random.default_rng(5).standard_normal((1, 3, 16, 16))
    label = np.zeros(28)
    label[4 + 3], label[8 + 3] = 1, 0                   # an object of class 0 in cell 3
    label[12 + 12:12 + 16] = [0.7, 0.8, 0.3, 0.2]
    net.blobs["label"].data[...] = label
    before = float(net.forward()["loss"])
    net.backward()
    for p in net.learnable_params:
        p.data[...] -= 1e-3 * p.diff
    assert float(net.forward()["loss"]) < before


def test_region_loss_refuses_the_hierarchical_softmax():
    for field in ("softmax_tree", "class_map"):
        layer = make_layer(REGION % ('%s: "data/9k.tree"' % field))
        with pytest.raises(Exception, match="%s .*not supported" % field):
            run_layer(layer, make_blobs([np.zeros((1, 7, 2, 2)), np.zeros((1, 2, 5))]), make_blobs(1))
