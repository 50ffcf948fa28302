"""mikuhatsune/e2e_face's MarginSoftmaxLoss and its lambda schedule (forks/face/e2e_face.py)."""
import math

import numpy as np
import pytest

from caffepy.forks.face.e2e_face import MarginSoftmaxLossLayer, Schedule
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import make_blobs, make_layer
from caffepy.testing.gradient_check import GradientChecker

# e2e_face's train_test.prototxt form of the layer
TEXT = ('type: "MarginSoftmaxLoss" param { lr_mult: 1 decay_mult: 1 } margin_softmax_loss_param {'
        ' num_output: 3 weight_filler { type: "xavier" } lambda { %s } }')


def _phi(c):
    theta = math.acos(max(-1.0, min(1.0, c)))
    k = min(int(theta // (math.pi / 4)), 3)
    return (-1) ** k * math.cos(4 * theta) - 2 * k


def _setup(lam, x, y, w):
    layer = make_layer(TEXT % lam, dtype=np.float64)
    bottom, top = make_blobs([x, y]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = w
    return layer, bottom, top


def _loss(x, y, w, lam):
    out = 0.0
    for xi, yi in zip(x, y):
        f = w @ xi
        xw = np.linalg.norm(xi) * np.linalg.norm(w[yi])
        f[yi] = (lam * f[yi] + xw * _phi(f[yi] / xw)) / (1 + lam)
        out -= f[yi] - np.log(np.exp(f).sum())
    return out / len(x)


def _vectors(cos_range, seed):
    """Items whose angle to their label's weight has its cosine in ``cos_range``."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((3, 4))
    x, y = [], []
    while len(x) < 5:
        v, j = rng.standard_normal(4) * 2, int(rng.integers(0, 3))
        c = v @ w[j] / np.linalg.norm(v) / np.linalg.norm(w[j])
        if cos_range[0] + 0.05 < c < cos_range[1] - 0.05:
            x.append(v)
            y.append(j)
    return np.array(x), np.array(y, float), w


def test_schedule_and_parse():
    p = parse_text('policy: STEPUP value: 1000 gamma: 0.31 step: 1500 max: 1000 min: 5',
                   caffe_pb2.ParamParameter())
    s = Schedule(p)
    values = [s.next() for _ in range(1501)]               # call 1501 sees iter 1500: changes
    assert values[-2] == 1000 and values[-1] == pytest.approx(310)
    assert s.next() == pytest.approx(310)
    p.iter = 3000                                          # two steps already made
    assert Schedule(p).value == pytest.approx(96.1, rel=1e-6)
    a = Schedule(parse_text('policy: ADDUP value: 0 gamma: 2 step: 2 max: 3',
                            caffe_pb2.ParamParameter()))
    assert [a.next() for _ in range(7)] == [0, 0, 2, 2, 3, 3, 3]


def test_forward_is_the_margin_softmax():
    x, y, w = _vectors((-1, 1), 0)
    for lam in ("value: 0", "value: 2.5"):
        layer, bottom, top = _setup(lam, x, y, w)
        assert isinstance(layer, MarginSoftmaxLossLayer)
        layer.forward(bottom, top)
        assert float(top[0].data) == pytest.approx(_loss(x, y.astype(int), w, 0 if lam[-1] == "0"
                                                         else 2.5), rel=1e-10)


@pytest.mark.parametrize("cos_range", [(0.0, math.sqrt(0.5)), (-1.0, -math.sqrt(0.5))])
def test_gradient_where_the_forks_backward_is_exact(cos_range):
    """Angles in (pi/4, pi/2) and (3 pi/4, pi): k odd."""
    x, y, w = _vectors(cos_range, 1)
    layer, bottom, top = _setup("value: 1.5", x, y, w)
    GradientChecker().check(layer, bottom, top, check_bottom=[0], first_setup=False)


def test_even_k_drops_the_derivative_of_phi_as_the_fork():
    x, y, w = _vectors((math.sqrt(0.5), 1.0), 2)          # k = 0
    lam = 1.5
    layer, bottom, top = _setup("value: 1.5", x, y, w)
    layer.forward(bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    yi = y.astype(int)
    eps, numeric = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        numeric[idx] = (_loss(xp, yi, w, lam) - _loss(xm, yi, w, lam)) / (2 * eps)
    p = layer.prob[np.arange(len(x)), yi]
    dropped = np.zeros_like(x)
    for i, (xi, j) in enumerate(zip(x, yi)):
        ip = xi @ w[j]
        c = ip / np.linalg.norm(xi) / np.linalg.norm(w[j])
        dphi = 16 * c * (2 * c * c - 1)
        dropped[i] = (p[i] - 1) / len(x) * dphi * (w[j] - ip * xi / (xi @ xi)) / (1 + lam)
    np.testing.assert_allclose(bottom[0].diff, numeric - dropped, rtol=1e-5, atol=1e-7)
