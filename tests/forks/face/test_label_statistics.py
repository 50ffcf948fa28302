import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer


def test_label_specific_statistics_follows_the_fork():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, np.pi, (4, 3))
    lab = np.array([0, 2, 1, 2], dtype=float)
    layer = make_layer('type: "LabelSpecificStatistics"')
    bottom, top = make_blobs([x, lab]), make_blobs(2)
    stats, margin = run_layer(layer, bottom, top)
    deg = np.degrees(x)
    pos = deg[np.arange(4), lab.astype(int)]
    neg = np.array([deg[i, j] for i in range(4) for j in range(3) if j != int(lab[i])])
    np.testing.assert_allclose(stats, [pos.mean(), pos.std(), neg.mean(), neg.std()])
    np.testing.assert_allclose(margin, [(neg.mean() - pos.mean()) / 2])
    top[1].diff[...] = 0.5
    layer.backward(top, [True, False], bottom)
    want = np.full((4, 3), 0.5 / 4 / 2 * 180 / np.pi)
    want[np.arange(4), lab.astype(int)] = -0.5 / 4 * 180 / np.pi
    np.testing.assert_allclose(bottom[0].diff, want)
