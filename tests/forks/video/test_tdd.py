"""iamyup/caffe_tdd's 2014 TransformSoftmaxWithLoss and TransformAccuracy (forks/video/tdd.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _table(tmp_path):
    (tmp_path / "t.txt").write_text("1 0 -1 2 1\n")          # 5 raw labels -> 3 classes
    return 'label_transform_param { label_transform_file: "%s" }' % (tmp_path / "t.txt")


def test_transform_softmax_loss(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 1, 1))
    lab = np.array([0.0, 2.0, 3.0, 1.0]).reshape(4, 1, 1, 1)    # -> 1, -1 (dropped), 2, 0
    layer = make_layer('type: "TransformSoftmaxWithLoss" ' + _table(tmp_path))
    loss, = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    e = np.exp(x.reshape(4, 3))
    p = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(float(loss), -(np.log(p[0, 1]) + np.log(p[2, 2]) +
                                              np.log(p[3, 0])) / 4)
    check_layer_gradient(layer, make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
    with pytest.raises(NetError, match="maps to 3 labels"):
        run_layer(make_layer('type: "TransformSoftmaxWithLoss" ' + _table(tmp_path)),
                  make_blobs([np.zeros((1, 4, 1, 1)), np.zeros((1, 1, 1, 1))]), make_blobs(1))


def test_transform_accuracy(tmp_path):
    s = np.array([[0.1, 0.9, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]).reshape(3, 3, 1, 1)
    lab = np.array([0.0, 1.0, 2.0]).reshape(3, 1, 1, 1)        # -> 1, 0, -1
    acc, = run_layer(make_layer('type: "TransformAccuracy" ' + _table(tmp_path)),
                     make_blobs([s, lab]), make_blobs(1))
    # item 0 right; item 1: a tie ranks class 1 first -> wrong; item 2 dropped label -> wrong
    np.testing.assert_allclose(acc.ravel(), [1 / 3.0])
