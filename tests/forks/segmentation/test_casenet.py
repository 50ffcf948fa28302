import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = 'type: "MultiChannelReweightedSigmoidCrossEntropyLoss"'


def _labels(classes, ignore):
    """Pack per-pixel class sets (N x C x H x W booleans) and an ignore mask into the fork's
    float bit patterns: one label channel (C < 32)."""
    bits = np.zeros(ignore.shape, np.uint32)
    for k in range(classes.shape[1]):
        bits |= classes[:, k].astype(np.uint32) << np.uint32(k)
    bits |= ignore.astype(np.uint32) << np.uint32(31)
    return bits.view(np.float32)[:, None].astype(np.float64)


def _reference(x, classes, ignore):
    """The fork's Forward_cpu loops, transcribed."""
    n, c = x.shape[:2]
    loss = 0.0
    for i in range(n):
        kept = ~ignore[i]
        edge = classes[i].any(axis=0) & kept
        p, q = edge.sum(), (~edge & kept).sum()
        for k in range(c):
            lp = ln = 0.0
            for (h, w), v in np.ndenumerate(x[i, k]):
                if ignore[i, h, w]:
                    continue
                term = v * ((1 if classes[i, k, h, w] else 0) - (v >= 0)) - np.log(
                    1 + np.exp(v - 2 * v * (v >= 0)))
                if classes[i, k, h, w]:
                    lp -= term
                else:
                    ln -= term
            if p + q:
                loss += lp * q / (p + q) + ln * p / (p + q)
    return loss / n


def test_reweighted_loss_matches_the_forks_loops_and_its_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)) * 2
    classes = rng.random((2, 3, 4, 5)) < 0.2
    ignore = rng.random((2, 4, 5)) < 0.15
    lab = _labels(classes, ignore)
    (loss,) = run_layer(make_layer(TEXT), make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_allclose(loss, _reference(x, classes, ignore), rtol=1e-10)
    check_layer_gradient(make_layer(TEXT), make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
