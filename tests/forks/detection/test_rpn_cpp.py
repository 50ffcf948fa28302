import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.detection.rpn_cpp import rpn_anchors, rpn_nms
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer, run_layer

ONE_ANCHOR = ('type: "RPN" rpn_param { feat_stride: 16 basesize: 16 scale: 1 ratio: 1 '
              'boxminsize: %d per_nms_topn: 0 post_nms_topn: 0 nms_thresh: %g }')


def test_anchors_round_half_away_and_truncate():
    a = rpn_anchors(16, [0.5, 1, 2], [8, 16, 32])
    np.testing.assert_array_equal(a[:3], [[-84, -40, 99, 55], [-176, -88, 191, 103],
                                          [-360, -184, 375, 199]])
    np.testing.assert_array_equal(a[3], [-56, -56, 71, 71])
    # ratio 2, scale 1: w = round(sqrt(128)) = 11, h = 22, centre 7.5: [2.5, -3, 12.5, 18]
    # stored as ints: [2, -3, 12, 18]
    np.testing.assert_array_equal(rpn_anchors(16, [2], [1]), [[2, -3, 12, 18]])


def _bottoms(fg, deltas, info=(20.0, 40.0, 1.0)):
    fg = np.asarray(fg, dtype=np.float64)                       # 1 x A x H x W
    scores = np.concatenate([1 - fg, fg], axis=1)
    return make_blobs([scores, deltas, np.array([info])])


def test_rpn_forward_hand_checked():
    # one anchor [0, 0, 15, 15], two cells: zero deltas give [0, 0, 16, 16] and [16, 0, 32, 16]
    # (corners centre -+ width / 2); IoU 17 / 561 < 0.7: both kept, best score first
    deltas = np.zeros((1, 4, 1, 2))
    rois, scores = run_layer(make_layer(ONE_ANCHOR % (16, 0.7)),
                             _bottoms([[[[0.3, 0.9]]]], deltas), make_blobs(2))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 16, 0, 32, 16], [0, 0, 0, 16, 16]])
    np.testing.assert_allclose(scores.ravel(), [0.9, 0.3])
    assert rois.shape == (2, 5, 1, 1)
    # dw = log 2 on cell 0: width 32 -> [-8, 24] clipped to [0, 24]; the clip bound is
    # im_info's width itself (40 here, cell 1 shifted by 30 reaches 48 -> 40)
    deltas[0, 0, 0, 1] = 30 / 16.0
    deltas[0, 2, 0, 0] = np.log(2)
    rois, _ = run_layer(make_layer(ONE_ANCHOR % (16, 0.7)),
                        _bottoms([[[[0.3, 0.9]]]], deltas), make_blobs(2))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 40, 0, 40, 16], [0, 0, 0, 24, 16]])


def test_rpn_min_size_before_clipping_and_scale():
    deltas = np.zeros((1, 4, 1, 2))
    deltas[0, 3, 0, 0] = np.log(1.5)            # cell 0: height 24, cell 1: height 16
    rois, = run_layer(make_layer(ONE_ANCHOR % (20, 0.7)),
                      _bottoms([[[[0.3, 0.9]]]], deltas), make_blobs(1))
    assert rois.reshape(-1, 5).shape == (0, 5)   # width 16 < 20 for both
    rois, = run_layer(make_layer(ONE_ANCHOR % (20, 0.7)),
                      _bottoms([[[[0.3, 0.9]]]], deltas, (20.0, 40.0, 0.5)), make_blobs(1))
    assert len(rois) == 2                        # min size 20 * 0.5 = 10


def test_rpn_nms_suppresses_at_equal_overlap():
    boxes = np.array([[0, 0, 9, 9], [0, 0, 9, 9], [20, 20, 29, 29]], dtype=float)
    np.testing.assert_array_equal(rpn_nms(boxes, 1.0), [0, 2])   # IoU 1 >= 1
    np.testing.assert_array_equal(rpn_nms(boxes, 0.0), [0])      # an unset threshold: one box


def test_rpn_rejects_wrong_channels():
    with pytest.raises(CaffeError, match="1 anchors need scores"):
        run_layer(make_layer(ONE_ANCHOR % (16, 0.7)),
                  make_blobs([np.zeros((1, 4, 1, 2)), np.zeros((1, 4, 1, 2)),
                              np.array([[20.0, 40.0, 1.0]])]), make_blobs(1))


NET = '''
name: "rpn"
input: "feat" input_shape { dim: 1 dim: 2 dim: 3 dim: 4 }
input: "im_info" input_shape { dim: 1 dim: 3 }
layer { name: "score" type: "Convolution" bottom: "feat" top: "score"
  convolution_param { num_output: 12 kernel_size: 1 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "bbox" type: "Convolution" bottom: "feat" top: "bbox"
  convolution_param { num_output: 24 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "prob" type: "Sigmoid" bottom: "score" top: "prob" }
layer { name: "proposal" type: "RPN" bottom: "prob" bottom: "bbox" bottom: "im_info"
  top: "rois" top: "rois_score"
  rpn_param { feat_stride: 16 basesize: 16 scale: 2 scale: 4 ratio: 0.5 ratio: 1 ratio: 2
              boxminsize: 4 per_nms_topn: 10 post_nms_topn: 5 nms_thresh: 0.7 } }
layer { name: "pool" type: "ROIPooling" bottom: "feat" bottom: "rois" top: "pool"
  roi_pooling_param { pooled_w: 2 pooled_h: 2 spatial_scale: 0.0625 } }
'''


def test_rpn_in_a_net_feeds_roi_pooling():
    net = Net(proto_io.read_net(NET), caffe_pb2.TEST)
    net.blobs["feat"].data[...] = np.random.default_rng(0).standard_normal((1, 2, 3, 4))
    net.blobs["im_info"].data[...] = [[48, 64, 1]]
    net.forward()
    rois = net.blobs["rois"].data.reshape(-1, 5)
    assert 1 <= len(rois) <= 5 and np.all(rois[:, 0] == 0)
    assert np.all(rois[:, 1::2] <= 64) and np.all(rois[:, 2::2] <= 48) and np.all(rois >= 0)
    assert np.all(np.diff(net.blobs["rois_score"].data.ravel()) <= 0)
    assert net.blobs["pool"].data.shape == (len(rois), 2, 2, 2)
