"""R-C3D's layers (caffepy.forks.video.rc3d): the twin proposal layer that stands in for its
``rpn.proposal_layer.ProposalLayer`` (chosen by form beside py-faster-rcnn's), and its temporal
ROIPooling, on small cases computed by hand."""
import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.forks.detection.frcnn.proposal import ProposalLayer
from caffepy.forks.video import rc3d
from caffepy.forks.video.rc3d import TemporalROIPoolingLayer, TwinProposalLayer, twin_anchors
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer, run_layer

ONE_SCALE = "'feat_stride': 8 \\n'scales': !!python/tuple [1]"   # one 8-frame anchor per cell


def _py(param_str, phase=caffepy.TEST):
    return make_layer('type: "Python" python_param { module: "rpn.proposal_layer" '
                      'layer: "ProposalLayer" param_str: "%s" }' % param_str, phase=phase)


def _twins(fg, deltas, param_str=ONE_SCALE, clips=1):
    """The layer on ``clips`` clips of L = len(fg) cells with one anchor: scores ``1 - fg, fg``."""
    scores = np.stack([1 - fg, fg]).reshape(1, 2, -1, 1, 1).repeat(clips, axis=0)
    deltas = np.asarray(deltas, dtype=np.float64).reshape(1, 2, -1, 1, 1).repeat(clips, axis=0)
    layer = _py(param_str)
    rois, scores = run_layer(layer, make_blobs([scores, deltas]), make_blobs(2))
    return layer, rois, scores


def test_anchors_by_hand():
    # base [0, 7], centre 3.5; scale s: length 8 s about the centre
    np.testing.assert_array_equal(twin_anchors([1, 2, 0.5]), [[0, 7], [-4, 11], [2, 5]])
    assert len(twin_anchors()) == 63


def test_zero_deltas_order_and_clip():
    # cells at 0, 8, 16: [x1, x2 + 1] (centre + w / 2), the last clipped to 3 * 8 - 1 = 23
    layer, rois, scores = _twins(np.array([0.2, 0.9, 0.5]), np.zeros((2, 3)))
    assert type(layer.py_layer) is TwinProposalLayer
    np.testing.assert_array_equal(rois, [[0, 8, 16], [0, 16, 23], [0, 0, 8]])
    np.testing.assert_allclose(scores, [[0.9], [0.5], [0.2]])


def test_deltas_nms_and_min_size():
    d = np.zeros((2, 3))
    d[0, 0] = 1.0                   # cell 0 moves one length (8) right: [8, 16], cell 1's segment
    d[1, 2] = np.log(0.5)           # cell 2 halves: centre 20, length 4 -> [18, 22], 5 < 8 frames
    _, rois, scores = _twins(np.array([0.2, 0.9, 0.5]), d)
    np.testing.assert_array_equal(rois, [[0, 8, 16]])             # the 0.2 duplicate: IoU 1 > 0.7
    np.testing.assert_allclose(scores, [[0.9]])
    d[1, 2] = np.log(2.0)           # doubles instead: [12, 28] clipped to [12, 23]
    _, rois, _ = _twins(np.array([0.2, 0.9, 0.5]), d)
    np.testing.assert_array_equal(rois, [[0, 8, 16], [0, 12, 23]])  # IoU 5 / 16 kept


def test_each_clip_of_a_batch_and_the_phase_settings(monkeypatch):
    _, rois, _ = _twins(np.array([0.2, 0.9, 0.5]), np.zeros((2, 3)), clips=2)
    np.testing.assert_array_equal(rois[:, 0], [0, 0, 0, 1, 1, 1])
    monkeypatch.setattr(rc3d, "cfg", rc3d.default_config())
    rc3d.cfg.TEST.RPN_POST_NMS_TOP_N = 1
    _, rois, _ = _twins(np.array([0.2, 0.9, 0.5]), np.zeros((2, 3)))
    np.testing.assert_array_equal(rois, [[0, 8, 16]])


def test_form_picks_the_twin_layer_or_py_faster_rcnn():
    twin = _py(ONE_SCALE)
    run_layer(twin, make_blobs([np.zeros((1, 2, 3, 1, 1))] * 2), make_blobs(1))
    assert type(twin.py_layer) is TwinProposalLayer
    frcnn = _py("'feat_stride': 16")                               # 3 bottoms, 9 anchors
    run_layer(frcnn, make_blobs([np.zeros((1, 18, 2, 2)), np.zeros((1, 36, 2, 2)),
                                 [[32, 32, 1]]]), make_blobs(1))
    assert type(frcnn.py_layer) is ProposalLayer


def test_no_form_fits_names_the_forms():
    layer = _py(ONE_SCALE)
    with pytest.raises(NetError) as e:              # H = 2: the twin layer needs H = W = 1
        run_layer(layer, make_blobs([np.zeros((1, 2, 3, 2, 1))] * 2), make_blobs(1))
    text = str(e.value)
    assert "no stand-in of caffepy's for rpn.proposal_layer.ProposalLayer takes this layer " \
           "(2 bottoms: (1, 2, 3, 2, 1), (1, 2, 3, 2, 1); 1 top)" in text
    assert "py-faster-rcnn's layer [3 bottoms, 1-2 tops, " in text and "it has 2 bottoms" in text
    assert "R-C3D's layer [2 bottoms, 1-2 tops, " in text
    assert "1 anchors need N x 2 x L x 1 x 1 scores and twin deltas" in text


# -- ROIPooling with pooled_l ---------------------------------------------------------------

def _roi_layer(pooled=(1, 2, 2), temporal_scale=0.125):
    return make_layer('type: "ROIPooling" roi_pooling_param { pooled_l: %d pooled_h: %d '
                      'pooled_w: %d temporal_scale: %g spatial_scale: 0.0625 }'
                      % (pooled + (temporal_scale,)))


def test_temporal_roi_pooling_by_hand():
    layer = _roi_layer()
    assert type(layer) is TemporalROIPoolingLayer
    x = np.arange(2 * 5 * 9 * 9, dtype=np.float64).reshape(1, 2, 5, 9, 9)
    # frames 8 .. 23 at 1/8: cells round(1) = 1 .. round(2.875) = 3; rows / columns [0, 6] of 9
    (y,) = run_layer(layer, make_blobs([x, [[0, 8, 23]]]), make_blobs(1))
    assert y.shape == (1, 2, 1, 2, 2)
    # bins of 7 / 2 = 3.5: rows [0, 4) and [3, 7); the maximum is each region's last element
    for c in range(2):
        np.testing.assert_array_equal(y[0, c, 0], [[x[0, c, 3, 3, 3], x[0, c, 3, 3, 6]],
                                                   [x[0, c, 3, 6, 3], x[0, c, 3, 6, 6]]])


def test_temporal_roi_pooling_backward_to_the_argmax():
    layer = _roi_layer(pooled=(2, 1, 1))
    x = np.zeros((1, 1, 4, 7, 7))
    x[0, 0, 0, 2, 5] = 3.0                               # frames [0, 16): cells 0 .. 2
    x[0, 0, 2, 6, 0] = 4.0
    bottom, top = make_blobs([x, [[0, 0, 16]]]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    np.testing.assert_array_equal(y.ravel(), [3, 4])    # cells [0, 2) and [1, 3) (bins of 1.5)
    top[0].diff[...] = np.array([10.0, 20.0]).reshape(top[0].shape)
    layer.backward(top, [True, True], bottom)
    expected = np.zeros_like(x)
    expected[0, 0, 0, 2, 5], expected[0, 0, 2, 6, 0] = 10, 20
    np.testing.assert_array_equal(bottom[0].diff, expected)
    np.testing.assert_array_equal(bottom[1].diff, 0)


def test_temporal_roi_pooling_checks():
    with pytest.raises(NetError, match="R x 3"):
        run_layer(_roi_layer(), make_blobs([np.zeros((1, 1, 2, 7, 7)), [[0, 1, 2, 3, 4]]]),
                  make_blobs(1))
    with pytest.raises(NetError, match="pooled_l, pooled_h and pooled_w must be > 0"):
        run_layer(_roi_layer(pooled=(1, 0, 2)),
                  make_blobs([np.zeros((1, 1, 2, 7, 7)), [[0, 1, 2]]]), make_blobs(1))


# -- an excerpt of R-C3D's test net (experiments/thumos14/test/test.prototxt) ---------------

EXCERPT = """
name: "rc3d_excerpt"
layer { name: "feat" type: "Input" top: "conv5b" top: "rpn_cls_prob_reshape" top: "rpn_twin_pred"
  input_param { shape { dim: 1 dim: 4 dim: 8 dim: 7 dim: 7 }
                shape { dim: 1 dim: 4 dim: 8 dim: 1 dim: 1 }
                shape { dim: 1 dim: 4 dim: 8 dim: 1 dim: 1 } } }
layer {
  name: 'proposal'
  type: 'Python'
  bottom: 'rpn_cls_prob_reshape'
  bottom: 'rpn_twin_pred'
  top: 'rpn_rois'
  include { phase: TEST }
  python_param {
    module: 'rpn.proposal_layer'
    layer: 'ProposalLayer'
    param_str: "'feat_stride': 8 \\n'scales': !!python/tuple [2,4]"
  }
}
layer {
  name: "roi_pool5"
  type: "ROIPooling"
  bottom: "conv5b"
  bottom: "rpn_rois"
  top: "pool5"
  roi_pooling_param { pooled_w: 4 pooled_h: 4 pooled_l: 1 spatial_scale: 0.0625
                      temporal_scale: 0.125 }
}
layer { name: "fc6" type: "InnerProduct" bottom: "pool5" top: "fc6"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
"""


def test_excerpt_net_summary_and_forward(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "test.prototxt"
    path.write_text(EXCERPT)
    assert main(["summary", str(path)]) == 0
    net = Net(proto_io.read_net(EXCERPT), caffe_pb2.TEST)
    rng = np.random.default_rng(0)
    for name in ("conv5b", "rpn_cls_prob_reshape", "rpn_twin_pred"):
        net.blobs[name].data[...] = rng.uniform(0, 1, net.blobs[name].shape)
    net.forward()
    rois = net.blobs["rpn_rois"].data
    assert rois.shape[1] == 3 and len(rois) >= 1
    assert np.all((rois[:, 1:] >= 0) & (rois[:, 1:] <= 8 * 8 - 1))
    assert net.blobs["pool5"].shape == (len(rois), 4, 1, 4, 4)
    assert net.blobs["fc6"].shape == (len(rois), 3)
