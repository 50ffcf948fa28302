"""JiajianZeng/ContextWithStructure's AveragePoint, FacialLandmarkPerformance, StructualLoss and
PerceptualLoss: forward values by hand from the fork's formulas, gradients, an excerpt's build."""
import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

RNG = np.random.default_rng(7)


def test_average_point_by_hand_and_gradient():
    # two points (x, y) interleaved: (1, 2), (3, 6) -> root (2, 4)
    layer = make_layer('type: "AveragePoint" average_point_param { num_landmark: 2 }')
    out = run_layer(layer, make_blobs([[[1.0, 2.0, 3.0, 6.0]]]), make_blobs(1))[0]
    assert out.shape == (1, 2, 1, 1)
    np.testing.assert_allclose(out.reshape(-1), [2.0, 4.0])
    layer = make_layer('type: "AveragePoint" average_point_param { num_landmark: 3 }')
    check_layer_gradient(layer, make_blobs([RNG.standard_normal((2, 6, 1, 1))]), make_blobs(1))


def test_average_point_refuses_a_row_of_another_length():
    layer = make_layer('type: "AveragePoint" average_point_param { num_landmark: 5 }')
    with pytest.raises(ShapeError, match="10 values per row"):
        run_layer(layer, make_blobs([np.zeros((2, 8))]), make_blobs(1))


def test_facial_landmark_performance_by_hand():
    layer = make_layer('type: "FacialLandmarkPerformance" facial_landmark_performance_param '
                       '{ num_landmark: 2 error_threshold: 0.3 }')
    pred = [[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 0.0, 0.0]]
    gt = [[0.3, 0.4, 1.0, 1.0], [0.5, 0.5, 0.6, 0.8]]
    d = [[1.0], [2.0]]
    # errors: image 0: 0.5 / 1, 0 / 1; image 1: 0 / 2, 1.0 / 2
    err, rate = run_layer(layer, make_blobs([pred, gt, d]), make_blobs(2))
    assert err.shape == rate.shape == (2, 1, 1, 1)
    np.testing.assert_allclose(err.reshape(-1), [0.25, 0.25])
    np.testing.assert_allclose(rate.reshape(-1), [0.5, 0.5])      # 0.5 > 0.3; 0.5 > 0.3


def _structure(points, root, w):
    d = points - root
    return w[0] * d[:, 0] + w[1] * d[:, 0] ** 2 + w[2] * d[:, 1] + w[3] * d[:, 1] ** 2


def test_structual_loss_by_hand():
    layer = make_layer('type: "StructualLoss" structual_loss_param { num_landmark: 2 '
                       'w0: 1 w1: 0.5 w2: 2 w3: 0.25 }')
    pred = np.array([[1.0, 2.0, 3.0, 1.0, 1.0, 1.0]])      # points (1, 2), (3, 1); root (1, 1)
    gt = np.array([[0.0, 0.0, 2.0, 2.0, 0.0, 1.0]])        # points (0, 0), (2, 2); root (0, 1)
    # offsets pred: (0, 1), (2, 0): s = 2 + 0.25, 2 + 2 = 2.25, 4
    # offsets gt:   (0, -1), (2, 1): s = -2 + 0.25, 2 + 2 + 2 + 0.25 = -1.75, 6.25
    # D = 4, -2.25; loss = (16 + 5.0625) / 2
    loss = run_layer(layer, make_blobs([pred, gt]), make_blobs(1))[0]
    np.testing.assert_allclose(loss, (16 + 5.0625) / 2)
    w = [1, 0.5, 2, 0.25]
    gap = (_structure(pred[0, :4].reshape(2, 2), pred[0, 4:], w)
           - _structure(gt[0, :4].reshape(2, 2), gt[0, 4:], w))
    np.testing.assert_allclose(gap, [4.0, -2.25])


def test_structual_loss_gradient_both_bottoms():
    layer = make_layer('type: "StructualLoss" structual_loss_param { num_landmark: 3 '
                       'w0: 1 w1: 0.5 w2: 1 w3: 0.5 }')
    bottom = make_blobs([RNG.standard_normal((3, 8)), RNG.standard_normal((3, 8, 1, 1))])
    check_layer_gradient(layer, bottom, make_blobs(1), check_bottom=[0, 1])


def test_perceptual_loss_by_hand_and_gradient():
    layer = make_layer('type: "PerceptualLoss" perceptual_loss_param { num_landmark: 2 '
                       'epsilon: 0.25 }')
    r = [[1.0, 2.0, 0.0, 1.0]]                        # residuals (1, 2), (0, 1)
    e = [[1.0, 1.0, 0.5, 3.0, -1.0, 1.0]]             # (Ex, Ey, Et) (1, 1, 0.5), (3, -1, 1)
    # s = 1 + 2 + 0.5 = 3.5, 0 - 1 + 1 = 0: sqrt(12.25 + 0.25) + sqrt(0.25)
    loss = run_layer(layer, make_blobs([r, e]), make_blobs(1))[0]
    np.testing.assert_allclose(loss, np.sqrt(12.5) + 0.5)
    layer = make_layer('type: "PerceptualLoss" perceptual_loss_param { num_landmark: 3 '
                       'epsilon: 0.01 }')
    bottom = make_blobs([RNG.standard_normal((2, 6)), RNG.standard_normal((2, 9, 1, 1))])
    check_layer_gradient(layer, bottom, make_blobs(1), check_bottom=[0])
    top = make_blobs(1)
    run_layer(layer, bottom, top)
    bottom[1].diff[...] = 1.0
    layer.backward(top, [True, True], bottom)
    assert not bottom[1].diff.any()                   # the fork gives the derivatives none


NET = '''
name: "landmark_excerpt"
input: "data" input_shape { dim: 2 dim: 3 dim: 16 dim: 16 }
input: "landmark" input_shape { dim: 2 dim: 10 dim: 1 dim: 1 }
input: "eyedist" input_shape { dim: 2 dim: 1 dim: 1 dim: 1 }
layer { name: "lmdb_root" type: "AveragePoint" bottom: "landmark" top: "root"
  propagate_down: false average_point_param { num_landmark: 5 } }
layer { name: "lm_fc2" type: "InnerProduct" bottom: "data" top: "lm_fc2"
  inner_product_param { num_output: 12 weight_filler { type: "xavier" } } }
layer { name: "lm_slice" type: "Slice" bottom: "lm_fc2" top: "lm_5_points" top: "lm_root"
  slice_param { axis: 1 slice_point: 10 } }
layer { name: "silence" type: "Silence" bottom: "lm_root" }
layer { name: "performance" type: "FacialLandmarkPerformance" bottom: "lm_5_points"
  bottom: "landmark" bottom: "eyedist" top: "average_error" top: "false_rate"
  facial_landmark_performance_param { num_landmark: 5 error_threshold: 0.1 } }
layer { name: "concat" type: "Concat" bottom: "landmark" bottom: "root" top: "lm_landmark"
  concat_param { axis: 1 } }
layer { name: "structual_loss" type: "StructualLoss" bottom: "lm_fc2" bottom: "lm_landmark"
  top: "structual_loss"
  structual_loss_param { num_landmark: 5 w0: 1.0 w1: 0.5 w2: 1.0 w3: 0.5 } }
'''


def test_excerpt_summary_strict_and_training_step(tmp_path):
    net = strict_excerpt(tmp_path, NET, caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((2, 3, 16, 16))
    net.blobs["landmark"].data[...] = RNG.uniform(0, 1, (2, 10, 1, 1))
    net.blobs["eyedist"].data[...] = 0.4
    net.forward()
    net.backward()
    assert net.blobs["root"].shape == (2, 2, 1, 1)
    assert net.blobs["average_error"].shape == (5, 1, 1, 1)
    assert np.isfinite(net.blobs["structual_loss"].data).all()
    assert np.abs(net.layer_by_name("lm_fc2").blobs[0].diff).sum() > 0
