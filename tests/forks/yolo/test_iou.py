"""MobileNet-YOLO's Yolov3 loss variants: iou_loss IOU / GIOU / DIOU / CIOU and use_focal_loss."""
import math

import numpy as np
import pytest

from caffepy.forks.yolo.iou import CIOU, DIOU, GIOU, IOU, iou_gradient, variant_iou
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer


def test_iou_loss_enum_has_the_fork_numbers():
    e = caffe_pb2.Yolov3Parameter
    assert (e.IOU, e.GIOU, e.MSE, e.DIOU, e.CIOU) == (0, 1, 2, 3, 4)
    assert caffe_pb2.Yolov3Parameter().iou_loss == e.MSE


def test_variant_values_hand_case():
    pred, truth = [0.25, 0.75, 1.0, 1.0], [0.3, 0.7, 0.9, 0.9]
    # I = 0.9 x 0.9, U = 1, the hull is the prediction: GIoU = IoU; centres 0.05, 0.05 apart
    assert variant_iou(pred, truth, IOU) == pytest.approx(0.81)
    assert variant_iou(pred, truth, GIOU) == pytest.approx(0.81)
    assert variant_iou(pred, truth, DIOU) == pytest.approx(0.81 - (0.005 / 2) ** 0.6)
    assert variant_iou(pred, truth, CIOU) == pytest.approx(0.81 - 0.005 / 2)   # same aspect
    apart = [0.8, 0.5, 0.2, 0.4]          # no overlap with [0.3, 0.5, 0.2, 0.2]
    # hull 0.7 x 0.4 = 0.28, union 0.12: GIoU = 0 - 0.16 / 0.28
    assert variant_iou(apart, [0.3, 0.5, 0.2, 0.2], GIOU) == pytest.approx(-0.16 / 0.28)
    v = 4 / math.pi ** 2 * (math.atan(1.0) - math.atan(0.5)) ** 2
    assert variant_iou(apart, [0.3, 0.5, 0.2, 0.2], CIOU) == pytest.approx(
        -0.25 / (0.49 + 0.16) - v / (1 + v + 1e-6) * v)


def _reference(kind, box, truth):
    """IoU (GIoU), and for DIOU / CIOU the squared centre distance S and hull diagonal C."""
    b, t = np.asarray(box), np.asarray(truth)
    value = variant_iou(b, t, GIOU if kind == GIOU else IOU)
    cw = max(b[0] + b[2] / 2, t[0] + t[2] / 2) - min(b[0] - b[2] / 2, t[0] - t[2] / 2)
    ch = max(b[1] + b[3] / 2, t[1] + t[3] / 2) - min(b[1] - b[3] / 2, t[1] - t[3] / 2)
    return value, (b[0] - t[0]) ** 2 + (b[1] - t[1]) ** 2, cw * cw + ch * ch


OVERLAP, APART = [0.42, 0.55, 0.3, 0.5], [0.9, 0.2, 0.2, 0.1]


@pytest.mark.parametrize("kind, pred", [(k, OVERLAP) for k in (IOU, GIOU, DIOU, CIOU)]
                         + [(DIOU, APART)])
def test_iou_gradient_against_central_differences(kind, pred):
    """For overlapping boxes dx, dy are the derivatives of the IoU part; dw, dh twice that (the
    fork does not halve them). DIOU / CIOU add the derivative of -S / C on w, h, and on x, y the fork's
    -(dS C + S dC) / C^2 (the hull term's sign flipped against d(-S / C)); CIOU adds
    alpha 8 / pi^2 (atan(wt / ht) - atan(w / h)) (h, -w) on dw, dh. Boxes apart: DIOU only (its
    formula is still the derivative there; IOU / GIOU / CIOU: test_iou_gradient_boxes_apart)."""
    truth = [0.5, 0.5, 0.4, 0.3]
    got = iou_gradient(pred, truth, kind)
    _, S, C = _reference(kind, pred, truth)
    want = []
    for q in range(4):
        hi, lo = list(pred), list(pred)
        hi[q] += 1e-6
        lo[q] -= 1e-6
        (a1, s1, c1), (a0, s0, c0) = _reference(kind, hi, truth), _reference(kind, lo, truth)
        d_iou, dS, dC = (a1 - a0) / 2e-6, (s1 - s0) / 2e-6, (c1 - c0) / 2e-6
        value = d_iou * (1 if q < 2 else 2)
        if kind in (DIOU, CIOU):
            value += -(dS * C + S * dC) / C ** 2 if q < 2 else -(dS * C - S * dC) / C ** 2
        want.append(value)
    if kind == CIOU:
        w, h, gap = pred[2], pred[3], math.atan(truth[2] / truth[3]) - math.atan(pred[2] / pred[3])
        v = 4 / math.pi ** 2 * gap * gap
        alpha = v / (1 - variant_iou(pred, truth, IOU) + v + 1e-6)
        want[2] += alpha * 8 / math.pi ** 2 * gap * h
        want[3] -= alpha * 8 / math.pi ** 2 * gap * w
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def _alpha_ar(pred, truth, i_over_u):
    """CIOU's alpha (h, -w) 8 / pi^2 (atan(wt / ht) - atan(w / h)) term on dw, dh."""
    gap = math.atan(truth[2] / truth[3]) - math.atan(pred[2] / pred[3])
    v = 4 / math.pi ** 2 * gap * gap
    alpha = v / (1 - i_over_u + v + 1e-6)
    return alpha * 8 / math.pi ** 2 * gap * pred[3], -alpha * 8 / math.pi ** 2 * gap * pred[2]


def _apart_cases():
    """Two box pairs that do not meet, with the fork's dx_box_iou worked by hand.

    dx_box_iou keeps the unclamped I = Iw Ih and U = X + Xhat - I; p_e = (U dI_e - I dU_e) / U^2
    per edge e (t, b, l, r) with dX_t = -(r - l), dX_b = r - l, dX_l = -(b - t), dX_r = b - t,
    dI_e = -Iw (t), Iw (b), -Ih (l), Ih (r) only where the prediction's edge lies inside the
    truth's, dU = dX - dI; then (dx, dy, dw, dh) = (l + r, t + b, r - l, b - t). GIOU apart:
    p_e = (G dU_e - U dG_e) / G^2 alone (G the hull area, dG_e = -Gw, Gw, -Gh, Gh where the
    prediction sets that hull edge). CIOU apart: dx = (2 (tx - x) C - 2 Cw dCw_x S) / C^2,
    dy likewise with Ch, dw = 2 (Cw dCw_w + Ch dCh_w) S / C^2 + alpha ar_dw, dh likewise
    (C = Cw^2 + Ch^2, S the squared centre distance; dCw_x = [r > rt] - [l < lt], dCw_w
    = ([r > rt] + [l < lt]) / 2, the same for Ch on y, h)."""
    # Pair 1: edges t b l r prediction 0.15 0.25 0.8 1.0, truth 0.35 0.65 0.3 0.7: Ih = Iw = -0.1,
    # I = 0.01, U = 0.02 + 0.12 - 0.01 = 0.13. dX = -0.2 0.2 -0.1 0.1; dI: b (0.25 < 0.65): -0.1,
    # l (0.8 > 0.3): 0.1; dU = -0.2 0.3 -0.2 0.1. U p = 0.002 -0.016 0.015 -0.001 (/ U^2 = 0.0169)
    p1, t1 = APART, [0.5, 0.5, 0.4, 0.3]
    iou1 = [0.014 / 0.0169, -0.014 / 0.0169, -0.016 / 0.0169, -0.018 / 0.0169]
    # hull 0.7 x 0.5, G = 0.35; the prediction sets t (dG -0.7) and r (0.5):
    # G dU - U dG = 0.021 0.105 -0.07 -0.03 (/ G^2 = 0.1225)
    giou1 = [-0.1 / 0.1225, 0.126 / 0.1225, 0.04 / 0.1225, 0.084 / 0.1225]
    # C = 0.49 + 0.25 = 0.74, S = 0.16 + 0.09 = 0.25; dCw_x = 1, dCh_y = -1, dCw_w = dCh_h = 0.5:
    # dx = (2 (-0.4) 0.74 - 1.4 x 0.25) / 0.74^2, dy = (2 (0.3) 0.74 + 1.0 x 0.25) / 0.74^2,
    # dw = 0.7 x 0.25 / 0.74^2, dh = 0.5 x 0.25 / 0.74^2
    aw, ah = _alpha_ar(p1, t1, 0.01 / 0.13)
    ciou1 = [-0.942 / 0.5476, 0.694 / 0.5476, 0.175 / 0.5476 + aw, 0.125 / 0.5476 + ah]
    # Pair 2: prediction 0.3 0.7 0.7 0.9, truth 0.4 0.6 0.2 0.4: Ih = 0.2, Iw = -0.3, I = -0.06,
    # U = 0.08 + 0.04 + 0.06 = 0.18. dX = -0.2 0.2 -0.4 0.4; dI: l (0.7 > 0.2): -0.2;
    # dU = -0.2 0.2 -0.2 0.4. U p = -0.012 0.012 -0.048 0.024 (/ U^2 = 0.0324)
    p2, t2 = [0.8, 0.5, 0.2, 0.4], [0.3, 0.5, 0.2, 0.2]
    iou2 = [-0.024 / 0.0324, 0.0, 0.072 / 0.0324, 0.024 / 0.0324]
    # hull 0.7 x 0.4, G = 0.28; the prediction sets t (-0.7), b (0.7), r (0.4):
    # G dU - U dG = 0.07 -0.07 -0.056 0.04 (/ G^2 = 0.0784)
    giou2 = [-0.016 / 0.0784, 0.0, 0.096 / 0.0784, -0.14 / 0.0784]
    # C = 0.49 + 0.16 = 0.65, S = 0.25; dCw_x = 1, dCh_y = 1 - 1 = 0, dCw_w = 0.5, dCh_h = 1
    aw, ah = _alpha_ar(p2, t2, -0.06 / 0.18)
    ciou2 = [(2 * -0.5 * 0.65 - 1.4 * 0.25) / 0.4225, 0.0, 0.175 / 0.4225 + aw,
             0.2 / 0.4225 + ah]
    return [(p1, t1, {IOU: iou1, GIOU: giou1, CIOU: ciou1}),
            (p2, t2, {IOU: iou2, GIOU: giou2, CIOU: ciou2})]


@pytest.mark.parametrize("kind", [IOU, GIOU, CIOU])
def test_iou_gradient_boxes_apart(kind):
    """Boxes that do not meet: the fork's dx_box_iou (not the derivative of an IoU of 0)."""
    for pred, truth, want in _apart_cases():
        np.testing.assert_allclose(iou_gradient(pred, truth, kind), want[kind], rtol=1e-12,
                                   atol=1e-15)


@pytest.mark.parametrize("kind", ["IOU", "GIOU", "CIOU"])
def test_yolov3_layer_delta_boxes_apart(kind):
    """The layer's coords delta for pair 2 of _apart_cases: one 1 x 1 cell, anchor 0.2 x 0.2;
    v = (log 4, 0, 0, log 2) predicts (0.8, 0.5, 0.2, 0.4); D = -0.25 g (1, 1, e^v2, e^v3)."""
    layer = make_layer('type: "Yolov3" yolov3_param { num_class: 1 num: 1 biases: [2, 2] '
                       'mask: [0] anchors_scale: 10 iou_loss: %s }' % kind)
    v = np.array([math.log(4), 0, 0, math.log(2), 0, 0]).reshape(1, 6, 1, 1)
    run_layer(layer, make_blobs([v, [[[0, 0.3, 0.5, 0.2, 0.2]]]]), make_blobs(1))
    want = _apart_cases()[1][2]
    g = -0.25 * np.array(want[getattr(caffe_pb2.Yolov3Parameter, kind)]) * [1, 1, 1, 2]
    np.testing.assert_allclose(layer.delta[0, 0, :4, 0, 0], g, rtol=1e-9)


LOSS = ('type: "Yolov3" yolov3_param { num_class: 2 num: 1 biases: [8, 8, 16, 16] mask: [1] '
        'anchors_scale: 8 thresh: 0.9 %s }')


def _case():
    v = np.zeros((1, 7, 2, 2))
    labels = np.zeros((1, 1, 2, 5))
    labels[0, 0, 0] = [1, 0.3, 0.7, 0.9, 0.9]   # cell (j, i) (1, 0); prediction (0.25, 0.75) 1 x 1
    return make_blobs([v, labels])


def test_giou_loss_hand_case():
    layer = make_layer((LOSS % "iou_loss: GIOU").replace("[8, 8, 16, 16]", "[4, 4, 16, 16]"))
    bottom, top = _case(), make_blobs(1)
    bottom[1].data[0, 0, 0] = [1, 0.5, 0.9, 0.9, 0.5]   # cell (1, 1), prediction (0.75, 0.75) 1 x 1
    (loss,) = run_layer(layer, bottom, top)
    # edges t, b, l, r: prediction 0.25 1.25 0.25 1.25, truth 0.65 1.15 0.05 0.95; Iw 0.7, Ih 0.5;
    # hull t 0.25 b 1.25 l 0.05 r 1.25 (1.2 x 1)
    I, U, C = 0.7 * 0.5, 1 + 0.45 - 0.35, 1.2 * 1.0
    # dI: only the prediction's left edge lies inside the truth's: dI_l = -Ih; dU = dX - dI
    dI = {"t": 0.0, "b": 0.0, "l": -0.5, "r": 0.0}
    dU = {"t": -1.0, "b": 1.0, "l": -1.0 + 0.5, "r": 1.0}
    # dC: the hull edges the prediction sets: t (-1.2), b (1.2), r (1.0)
    dC = {"t": -1.2, "b": 1.2, "l": 0.0, "r": 1.0}
    p = {k: (U * dI[k] - I * dU[k]) / U ** 2 + (C * dU[k] - U * dC[k]) / C ** 2 for k in dU}
    d = np.array([p["l"] + p["r"], p["t"] + p["b"], p["r"] - p["l"], p["b"] - p["t"]])
    np.testing.assert_allclose(layer.delta[0, 0, :4, 1, 1], -0.25 * d, rtol=1e-9)
    giou = I / U - (C - U) / C
    # objectness 0.5 in the three empty cells, -0.5 at the truth; classes 0.45, -0.45 (eps 0.1)
    np.testing.assert_allclose(loss, 3 * 0.25 + 0.25 + 2 * 0.45 ** 2 + 0.25 * (1 - giou), rtol=1e-9)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff[0, :4, 1, 1], -0.25 * d, rtol=1e-9)


@pytest.mark.parametrize("kind, r", [("DIOU", 0.81 - 0.0025 ** 0.6), ("CIOU", 0.81 - 0.0025),
                                     ("IOU", 0.81 - 0.0025 ** 0.6)])
def test_diou_ciou_iou_loss_terms(kind, r):
    layer = make_layer(LOSS % ("iou_loss: %s max_delta: 0.1 accumulate: false" % kind))
    (loss,) = run_layer(layer, _case(), make_blobs(1))
    np.testing.assert_allclose(loss, 1.405 + 0.25 * (1 - r), rtol=1e-9)   # IOU reports DIoU
    assert np.abs(layer.delta[0, 0, :4]).max() == pytest.approx(0.1)      # clipped (float32 0.1)


def test_focal_class_delta_hand_case():
    layer = make_layer((LOSS % "use_focal_loss: true").replace("[8, 8, 16, 16]", "[4, 4, 16, 16]"))
    bottom = _case()
    bottom[1].data[0, 0, 0] = [1, 0.5, 0.9, 0.9, 0.5]   # cell (1, 1); matched once (IoU 0.45)
    run_layer(layer, bottom, make_blobs(1))
    p = 0.5 + 1e-15
    g = 0.5 * -(1 - p) * (2 * p * math.log(p) + p - 1)           # 0.5 x 0.5966
    np.testing.assert_allclose(layer.delta[0, 0, 5:, 1, 1], [0.5 * g, -0.5 * g], rtol=1e-9)
    np.testing.assert_allclose(layer.delta[0, 0, 5:, 0, 0], 0.0)
    # matched twice (the fork's second pass over mask anchors): the class entry is set again
    # with the smoothed target, -(0.95 - 0.5)
    layer = make_layer(LOSS % "use_focal_loss: true")
    run_layer(layer, _case(), make_blobs(1))
    np.testing.assert_allclose(layer.delta[0, 0, 5:, 1, 0], [0.5 * g, -0.45], rtol=1e-7)


@pytest.mark.parametrize("extra", ["iou_loss: CIOU use_focal_loss: true", "iou_loss: GIOU"])
def test_tiny_yolov3_variants_one_training_step(extra):
    from tests.forks.yolo.test_output import TINY_YOLOV3, tiny_yolov3_step
    prototxt = TINY_YOLOV3.replace("yolov3_param {", "yolov3_param { %s" % extra)
    before, after, _ = tiny_yolov3_step(prototxt)
    assert after < before   # (decreases for filler seeds 0-7 too)
