import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _bits_as_float(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _ce(x, t):
    return -(x * (t - (x >= 0)) - np.log(1 + np.exp(x - 2 * x * (x >= 0))))


def _multichannel_ref(x, bits):
    """A transcription of the fork's forward loops."""
    n, c = x.shape[:2]
    xs, bs = x.reshape(n, c, -1), bits.reshape(n, -1)
    loss = 0.0
    for i in range(n):
        for k in range(c):
            for j in range(xs.shape[2]):
                if bs[i, j] & (1 << 31):
                    continue
                loss += _ce(xs[i, k, j], float((bs[i, j] >> k) & 1))
    return loss / n


def test_multichannel_sigmoid_cross_entropy_reads_label_bits():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2, 3)) * 2
    bits = rng.integers(0, 8, (2, 1, 2, 3)).astype(np.uint32)
    bits[0, 0, 1, 2] |= np.uint32(1 << 31)
    labels = _bits_as_float(bits)
    text = 'type: "MultiChannelSigmoidCrossEntropyLoss"'
    loss, = run_layer(make_layer(text, dtype=np.float32), make_blobs([x, labels], np.float32),
                      make_blobs(1, np.float32))
    np.testing.assert_allclose(loss, _multichannel_ref(x.astype(np.float32), bits), rtol=1e-5)
    check_layer_gradient(make_layer(text), make_blobs([x, labels]), make_blobs(1),
                         check_bottom=[0])


def _reweighted_ref(x, bits):
    n = x.shape[0]
    xs, bs = x.reshape(n, -1), bits.reshape(n, -1)
    total = 0.0
    for i in range(n):
        lp = ln = cp = cn = 0.0
        for j in range(xs.shape[1]):
            if bs[i, j] & (1 << 31):
                continue
            if bs[i, j] != 0:
                cp += 1
                lp += _ce(xs[i, j], 1.0)
            else:
                cn += 1
                ln += _ce(xs[i, j], 0.0)
        total += lp * cn / (cp + cn) + ln * cp / (cp + cn)
    return total / n


def test_reweighted_sigmoid_cross_entropy_balances_each_image():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 1, 3, 4)) * 2
    bits = (rng.random((2, 1, 3, 4)) > 0.7).astype(np.uint32) * np.uint32(5)
    bits[1, 0, 0, :2] = np.uint32(1 << 31)
    labels = _bits_as_float(bits)
    text = 'type: "ReweightedSigmoidCrossEntropyLoss"'
    loss, = run_layer(make_layer(text), make_blobs([x, labels]), make_blobs(1))
    np.testing.assert_allclose(loss, _reweighted_ref(x, bits), rtol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([x, labels]), make_blobs(1),
                         check_bottom=[0])
    bits[0] = np.uint32(1 << 31)
    with pytest.raises(CaffeError, match="ignored"):
        run_layer(make_layer(text), make_blobs([x, _bits_as_float(bits)]), make_blobs(1))
