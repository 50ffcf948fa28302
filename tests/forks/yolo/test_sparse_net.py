import math

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import io as proto_io
from caffepy.testing import make_blobs, make_layer, run_layer

S, NUM, C = 2, 5, 2
L = 5 + C
BIAS_VALUES = [1, 1, 2, 1.5, 0.5, 0.8, 1.2, 2, 0.7, 0.4]
BIASES = " ".join("biases: %g" % b for b in BIAS_VALUES)
REGION = ('type: "Region" bottom: "x" top: "box" top: "prob" region_loss_param { side: 2 '
          'num: 5 num_classes: 2 coords: 4 threshold: 0.1 %s %s }')
LOSS = ('type: "RegionLoss" bottom: "x" bottom: "label" region_loss_param { side: 2 num: 5 '
        'num_classes: 2 coords: 4 threshold: 0.4 object_scale: 5 noobject_scale: 1 '
        'coord_scale: 1 class_scale: 1 rescore: %d %s %s }')


def _sig(t):
    return 1.0 / (1.0 + math.exp(-t))


def _activated(v, softmax=True):
    """The fork's copy O, element by element on the flat (num, L, S*S) layout."""
    o = v.copy()
    for n in range(NUM):
        for k in range(S * S):
            for e in (0, 1, 4):
                o[n, e, k] = _sig(v[n, e, k])
            if softmax:
                e = np.exp(v[n, 5:, k] - v[n, 5:, k].max())
                o[n, 5:, k] = e / e.sum()
    return o


def _box(o, biases, n, k):
    col, row = k % S, k // S
    return [(col + o[n, 0, k]) / S, (row + o[n, 1, k]) / S,
            math.exp(o[n, 2, k]) * biases[2 * n] / S, math.exp(o[n, 3, k]) * biases[2 * n + 1] / S]


def _iou(a, b):
    def ov(x1, w1, x2, w2):
        return min(x1 + w1 / 2, x2 + w2 / 2) - max(x1 - w1 / 2, x2 - w2 / 2)
    w, h = ov(a[0], a[2], b[0], b[2]), ov(a[1], a[3], b[1], b[3])
    if w < 0 or h < 0:
        return 0.0
    return w * h / (a[2] * a[3] + b[2] * b[3] - w * h)


def test_region_boxes_and_scores_of_the_first_image():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, NUM * L, S, S))
    box, prob = run_layer(make_layer(REGION % ("", BIASES)), make_blobs([x]), make_blobs(2))
    assert box.shape == (NUM, S, S, 4) and prob.shape == (NUM, S, S, C + 1)
    o, b = _activated(x[0].reshape(NUM, L, S * S)), BIAS_VALUES
    for n in range(NUM):
        for k in range(S * S):
            np.testing.assert_allclose(box[n, k // S, k % S], _box(o, b, n, k), rtol=1e-6)
            s = [o[n, 4, k] * o[n, 5 + c, k] for c in range(C)]
            want = [v if v > 0.1 else 0 for v in s + [max(s + [0])]]
            np.testing.assert_allclose(prob[n, k // S, k % S], want, rtol=1e-6)


def test_region_without_softmax_and_count_check():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, NUM * L, S, S))
    _, prob = run_layer(make_layer(REGION % ("softmax: 0", BIASES)), make_blobs([x]),
                        make_blobs(2))
    o = _activated(x[0].reshape(NUM, L, S * S), softmax=False)
    s = o[0, 4, 3] * o[0, 5, 3]
    assert prob[0, 1, 1, 0] == pytest.approx(s if s > 0.1 else 0)
    with pytest.raises(CaffeError, match="values per image"):
        run_layer(make_layer(REGION % ("", BIASES)), make_blobs([x[:, :-1]]), make_blobs(2))



@pytest.mark.parametrize("written, want", [("softmax: true", True), ("softmax: false", False),
                                           ("softmax: 1", True), ("softmax: 0", False), ("", True)])
def test_region_softmax_reads_both_forks_spellings_strictly(written, want):
    """zhangnju/sparse_net declares ``bool softmax = 6 [default = true]``, intel/caffe
    ``uint32 softmax = 6 [default = 1]``: both spellings are read by the strict parser."""
    lp = proto_io.read_net('layer { name: "r" %s }' % (REGION % (written, BIASES))).layer[0]
    assert lp.region_loss_param.softmax is want

def _labels():
    lab = np.zeros((2, 30 * NUM))
    lab[0, :10] = [1, 0.3, 0.6, 0.4, 0.5, 0, 0.8, 0.2, 0.1, 0.15]
    lab[1, :5] = [0, 0.55, 0.45, 0.9, 0.7]
    return lab


def _reference(x, lab, rescore, softmax=True, thresh=0.4):
    """region_loss_layer.cpp's Forward_cpu, loop by loop."""
    b_ = BIAS_VALUES
    N = x.shape[0]
    out = np.zeros((N, NUM, L, S * S))
    delta = np.zeros_like(out)
    flat = lab.ravel()
    for b in range(N):
        o = out[b] = _activated(x[b].reshape(NUM, L, S * S), softmax)
        truths = []
        for t in range(30):
            row = flat[b * 150 + t * 5: b * 150 + t * 5 + 5]
            if row[1] == 0:
                break
            truths.append(row)
        for k in range(S * S):
            for n in range(NUM):
                best = max([_iou(_box(o, b_, n, k), t[1:]) for t in truths] + [0])
                delta[b, n, 4, k] = 0 if best > thresh else -1.0 * o[n, 4, k]
        for label, tx, ty, tw, th in truths:
            i, j = int(tx * S), int(ty * S)
            k = j * S + i
            best, bn = 0, 0
            for n in range(NUM):
                cand = [0, 0, b_[2 * n] / S, b_[2 * n + 1] / S]
                iou = _iou(cand, [0, 0, tw, th])
                if iou > best:
                    best, bn = iou, n
            sc = 2 - tw * th
            d = delta[b, bn, :, k]
            d[0] = sc * (tx * S - i - o[bn, 0, k])
            d[1] = sc * (ty * S - j - o[bn, 1, k])
            d[2] = sc * (math.log(tw * S / b_[2 * bn]) - o[bn, 2, k])
            d[3] = sc * (math.log(th * S / b_[2 * bn + 1]) - o[bn, 3, k])
            iou = _iou(_box(o, b_, bn, k), [tx, ty, tw, th])
            d[4] = 5 * ((iou if rescore else 1) - o[bn, 4, k])
            for c in range(C):
                d[5 + c] = (c == int(label)) - o[bn, 5 + c, k]
    return float(np.sum(delta ** 2)), delta.reshape(x.shape)


@pytest.mark.parametrize("rescore", [0, 1])
def test_region_loss_forward_and_backward_are_the_forks_delta(rescore):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, NUM * L, S, S))
    lab = _labels()
    layer = make_layer(LOSS % (rescore, "", BIASES))
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    ref_loss, ref_delta = _reference(x, lab, rescore)
    assert float(loss) == pytest.approx(ref_loss, rel=1e-6)
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, -2.0 * ref_delta, rtol=1e-5, atol=1e-6)


def test_region_loss_checks_and_variant_choice():
    x = np.zeros((1, NUM * L, S, S))
    with pytest.raises(CaffeError, match="30 num"):
        run_layer(make_layer(LOSS % (1, "", BIASES)), make_blobs([x, np.zeros((1, 30 * 4))]),
                  make_blobs(1))
    lab = np.zeros((1, 150))
    lab[0, :5] = [3, 0.5, 0.5, 0.2, 0.2]
    with pytest.raises(CaffeError, match="not below num_classes"):
        run_layer(make_layer(LOSS % (1, "", BIASES)), make_blobs([x, lab]), make_blobs(1))
    layer = make_layer(LOSS % (1, "", BIASES))
    assert type(layer).__name__ == "SparseNetRegionLossLayer"
    other = make_layer('type: "RegionLoss" bottom: "x" bottom: "l" '
                       'region_loss_param { num_class: 2 }')
    assert type(other).__name__ == "RegionLossLayer"


def test_box_data_random_field_reads():
    net = proto_io.read_net('''name: "t"
      layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 } }
              transform_param { random: true scale: 0.5 } }''')
    assert net.layer[0].transform_param.random
