"""Curve-Text-Detector's layers (caffepy.forks.detection.ctd): its RPN proposal layer, a stand-in
for ``rpn.proposal_layer.ProposalLayer`` chosen by its anchors' channels beside py-faster-rcnn's,
and its Convert layer, on small cases computed by hand."""
import numpy as np
import pytest

import caffepy
from caffepy.forks.detection import ctd
from caffepy.forks.detection.ctd import ConvertLayer, CtdProposalLayer, ctd_anchors
from caffepy.forks.detection.frcnn.proposal import ProposalLayer
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _py(param_str="'feat_stride': 16"):
    return make_layer('type: "Python" python_param { module: "rpn.proposal_layer" '
                      'layer: "ProposalLayer" param_str: "%s" }' % param_str)


def test_anchors_by_hand():
    # about the 16 x 16 box (centre 7.5): ratio h / w = 0.25 keeps the area 256: w = 32, h = 8;
    # 0.5: w = round(sqrt(512)) = 23, h = round(11.5) = 12 (to even); 2: w = 11, h = 22
    a = ctd_anchors({})
    assert a.shape == (12, 4)                             # 3 ratios x scales 4, 8, 16, 22
    np.testing.assert_array_equal(a[0], [7.5 - 63.5, 7.5 - 15.5, 7.5 + 63.5, 7.5 + 15.5])
    np.testing.assert_array_equal(a[4], [7.5 - 45.5, 7.5 - 23.5, 7.5 + 45.5, 7.5 + 23.5])
    np.testing.assert_array_equal(a[8], [7.5 - 21.5, 7.5 - 43.5, 7.5 + 21.5, 7.5 + 43.5])
    np.testing.assert_array_equal(ctd_anchors({"scales": [1]}),
                                  [[-8, 4, 23, 11], [-3.5, 2, 18.5, 13], [2.5, -3, 12.5, 18]])


def test_forward_by_hand():
    """Scale 1 (3 anchors) on one cell, zero deltas: boxes [x1, y1, x2 + 1, y2 + 1] clipped to
    the image; min side 16 * im_info scale 0.5 = 8; pairwise IoU 0.60, 0.30, 0.45 < 0.7."""
    layer = CtdProposalLayer(None)
    layer.param_str, layer.phase = "'feat_stride': 16, 'scales': [1]", caffepy.TEST
    fg = [0.9, 0.8, 0.7]
    bottom = make_blobs([np.array([[1 - v for v in fg] + fg]).reshape(1, 6, 1, 1),
                         np.zeros((1, 12, 1, 1)), [[100, 100, 0.5]]])
    top = make_blobs(2)
    layer.setup(bottom, top)
    assert top[1].shape == (1, 1, 1, 1)
    layer.forward(bottom, top)
    np.testing.assert_allclose(top[0].data, [[0, 0, 4, 24, 12], [0, 0, 2, 19.5, 14],
                                             [0, 2.5, 0, 13.5, 19]])
    np.testing.assert_allclose(top[1].data, [[0.9], [0.8], [0.7]])
    bottom[2].data[0, 2] = 1.0                            # min side 16: all three are too small
    layer.forward(bottom, top)
    assert top[0].shape == (0, 5)


def test_settings_are_the_forks(monkeypatch):
    assert ctd.cfg.TEST == dict(RPN_NMS_THRESH=0.7, RPN_MIN_SIZE=16, RPN_PRE_NMS_TOP_N=6000,
                                RPN_POST_NMS_TOP_N=300)
    assert ctd.cfg.TRAIN.RPN_NMS_THRESH == 0.5
    monkeypatch.setattr(ctd, "cfg", ctd.default_config())
    ctd.cfg.TEST.RPN_POST_NMS_TOP_N = 1
    layer = _py()
    scores = np.zeros((1, 24, 1, 1))
    scores[0, 12:, 0, 0] = np.linspace(0.1, 0.9, 12)
    rois, = run_layer(layer, make_blobs([scores, np.zeros((1, 48, 1, 1)), [[600, 600, 1]]]),
                      make_blobs(1))
    # the best: anchor 11 (ratio 2, scale 22: 242 x 484 about 7.5, [-113, -234, 128, 249]),
    # zero deltas [x1, y1, x2 + 1, y2 + 1], clipped to the image
    np.testing.assert_allclose(rois, [[0, 0, 0, 129, 250]])


def test_form_picks_ctd_or_py_faster_rcnn_by_channels():
    layer = _py()
    run_layer(layer, make_blobs([np.zeros((1, 24, 2, 2)), np.zeros((1, 48, 2, 2)),
                                 [[32, 32, 1]]]), make_blobs(1))
    assert type(layer.py_layer) is CtdProposalLayer
    layer = _py()
    run_layer(layer, make_blobs([np.zeros((1, 18, 2, 2)), np.zeros((1, 36, 2, 2)),
                                 [[32, 32, 1]]]), make_blobs(1))
    assert type(layer.py_layer) is ProposalLayer
    # scales of one length give both forks 3 anchors: py-faster-rcnn's, registered first
    layer = _py("'feat_stride': 16, 'scales': [1]")
    run_layer(layer, make_blobs([np.zeros((1, 6, 2, 2)), np.zeros((1, 12, 2, 2)),
                                 [[32, 32, 1]]]), make_blobs(1))
    assert type(layer.py_layer) is ProposalLayer


# -- Convert ----------------------------------------------------------------------------------

def test_convert_by_hand():
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 1, 4)     # N = 2, D = 3, W = 4
    layer = make_layer('type: "Convert"')
    assert type(layer) is ConvertLayer
    seq, cont = run_layer(layer, make_blobs([x]), make_blobs(2))
    assert seq.shape == (4, 2, 3) and cont.shape == (4, 2)
    for w in range(4):
        np.testing.assert_array_equal(seq[w], x[:, :, 0, w])
    np.testing.assert_array_equal(cont, [[0, 0], [1, 1], [1, 1], [1, 1]])


def test_convert_gradient():
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 4))
    check_layer_gradient(make_layer('type: "Convert"'), make_blobs([x]), make_blobs(1))


def test_convert_refuses_middle_axes():
    with pytest.raises(caffepy.errors.NetError, match="middle axes of size 1"):
        run_layer(make_layer('type: "Convert"'), make_blobs([np.zeros((2, 3, 2, 4))]),
                  make_blobs(1))


# -- an excerpt of models/ctd/test_ctd_tloc.prototxt ------------------------------------------

EXCERPT = """
name: "ctd_excerpt"
input: "data"
input_shape { dim: 1 dim: 8 dim: 6 dim: 6 }
input: "im_info"
input_shape { dim: 1 dim: 3 }
input: "psroipooled_loc_rois_info_h"
input_shape { dim: 2 dim: 16 dim: 7 dim: 7 }
layer { name: "rpn_cls_score" type: "Convolution" bottom: "data" top: "rpn_cls_score"
  convolution_param { num_output: 24 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "rpn_bbox_pred" type: "Convolution" bottom: "data" top: "rpn_bbox_pred"
  convolution_param { num_output: 48 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer {
   bottom: "rpn_cls_score"
   top: "rpn_cls_score_reshape"
   name: "rpn_cls_score_reshape"
   type: "Reshape"
   reshape_param { shape { dim: 0 dim: 2 dim: -1 dim: 0 } }
}
layer { name: "rpn_cls_prob" type: "Softmax" bottom: "rpn_cls_score_reshape" top: "rpn_cls_prob" }
layer {
  name: 'rpn_cls_prob_reshape'
  type: 'Reshape'
  bottom: 'rpn_cls_prob'
  top: 'rpn_cls_prob_reshape'
  reshape_param { shape { dim: 0 dim: 24 dim: -1 dim: 0 } }
}
layer {
  name: 'proposal'
  type: 'Python'
  bottom: 'rpn_cls_prob_reshape'
  bottom: 'rpn_bbox_pred'
  bottom: 'im_info'
  top: 'rois'
  python_param {
    module: 'rpn.proposal_layer'
    layer: 'ProposalLayer'
    param_str: "'feat_stride': 16"
  }
}
layer {
  name: "lstm_input_reshape_h"
  type: "Reshape"
  bottom: "psroipooled_loc_rois_info_h"
  top: "im2col_transpose_h"
  reshape_param { shape { dim: 0 dim: -1 dim: 1 dim: 16} }
}
layer {
  name: "conv_lstm_h"
  type: "Convert"
  bottom: "im2col_transpose_h"
  top: "conv_lstm_h"
  top: "cont_sentence_h"
}
layer {
    name: "lstm1_h"
    type: "LSTM"
    bottom: "conv_lstm_h"
    bottom: "cont_sentence_h"
    top: "lstm1_h"
    recurrent_param { num_output: 8 weight_filler { type: "xavier" } }
}
"""


def test_excerpt_net_summary_and_forward(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "test.prototxt"
    path.write_text(EXCERPT)
    assert main(["summary", str(path)]) == 0
    net = Net(proto_io.read_net(EXCERPT), caffe_pb2.TEST)
    rng = np.random.default_rng(0)
    net.blobs["data"].data[...] = rng.standard_normal(net.blobs["data"].shape)
    net.blobs["im_info"].data[...] = [[96, 96, 1]]
    net.blobs["psroipooled_loc_rois_info_h"].data[...] = rng.standard_normal((2, 16, 7, 7))
    net.forward()
    assert type(net.layer_dict["proposal"].py_layer) is CtdProposalLayer
    rois = net.blobs["rois"].data
    assert rois.shape[1] == 5 and len(rois) >= 1
    assert net.blobs["conv_lstm_h"].shape == (16, 2, 49)
    assert net.blobs["lstm1_h"].shape == (16, 2, 8)
