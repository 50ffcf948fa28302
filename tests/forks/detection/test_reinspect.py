import itertools

import numpy as np

from caffepy.forks.detection.reinspect import min_cost_assignment
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_min_cost_assignment_is_optimal():
    rng = np.random.default_rng(0)
    for _ in range(20):
        cost = rng.integers(0, 50, (5, 5)).astype(float)
        rows = min_cost_assignment(cost)
        best = min(sum(cost[i, q[i]] for i in range(5)) for q in itertools.permutations(range(5)))
        assert sorted(rows) == list(range(5))
        assert sum(cost[i, rows[i]] for i in range(5)) == best


def _boxes(rng, n, npred):
    b = rng.uniform(0, 10, (n, 4, npred, 1))
    b[:, 0] += 100.0 * np.arange(npred)[:, None]           # boxes far apart
    b[:, 2:] = rng.uniform(20, 40, (n, 2, npred, 1))
    return b


def test_hungarian_loss_matches_boxes_like_the_fork():
    rng = np.random.default_rng(1)
    n, npred = 2, 4
    boxes = _boxes(rng, n, npred)
    order = [2, 0, 3, 1]
    pred = boxes[:, :, order] + rng.normal(0, 1, (n, 4, npred, 1))
    flags = np.zeros((n, 1, npred, 1))
    flags[0, 0, :3] = 1
    flags[1, 0, :4] = 1
    text = 'type: "HungarianLoss" hungarian_loss_param { match_ratio: 0.5 }'
    loss, conf, which = run_layer(make_layer(text, phase=caffe_pb2.TRAIN),
                                  make_blobs([pred, boxes, flags]), make_blobs(3))
    # sample 1: prediction i is box order[i]; sample 0: box 3 is not real
    np.testing.assert_array_equal(which[1].reshape(-1), order)
    np.testing.assert_array_equal(which[0].reshape(-1), [2, 0, -1, 1])
    np.testing.assert_array_equal(conf[0].reshape(-1), [1, 1, 0, 1])
    want = 0.0
    for s in range(n):
        for i, j in enumerate(which[s].reshape(-1).astype(int)):
            if j >= 0:
                want += np.abs(pred[s, :, i] - boxes[s, :, j]).sum()
    np.testing.assert_allclose(loss, want / n)
    check_layer_gradient(make_layer(text, phase=caffe_pb2.TRAIN),
                         make_blobs([pred, boxes, flags]), make_blobs(3), check_bottom=[0])


def test_numpy_data_fills_its_top_from_the_runtime_parameter():
    text = 'type: "NumpyData" rp { numpy_data_param { shape: 2 shape: 3 data: [1, 2, 3, 4] } }'
    y, = run_layer(make_layer(text), [], make_blobs(1))
    np.testing.assert_array_equal(y, [[1, 2, 3], [4, 0, 0]])
