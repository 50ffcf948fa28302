"""Caffe's example Python layer pyloss.EuclideanLossLayer, built in (caffepy.forks.misc.pyloss)."""
import sys

import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _layer():
    return make_layer('type: "Python" python_param { module: "pyloss" layer: "EuclideanLossLayer" }'
                      ' loss_weight: 1')


def test_pyloss_forward_and_gradient(monkeypatch):
    monkeypatch.delitem(sys.modules, "pyloss", raising=False)   # a user's pyloss would win
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    loss, = run_layer(_layer(), make_blobs([x, y]), make_blobs(1))
    np.testing.assert_allclose(loss, np.sum((x - y) ** 2) / 8)
    check_layer_gradient(_layer(), make_blobs([x, y]), make_blobs(1))
