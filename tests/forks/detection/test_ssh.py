"""SSH's ``SSH.layers.proposal_layer.ProposalLayer`` (caffepy.forks.detection.ssh) standing in
when the fork's module is absent, on small cases computed by hand."""
import numpy as np

import caffepy
from caffepy.forks.detection import ssh
from caffepy.forks.detection.ssh import SshProposalLayer
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer, run_layer

# two anchors per cell: 16 x 16 [0, 0, 15, 15] and 32 x 32 [-8, -8, 23, 23]
TWO_ANCHORS = "{'feat_stride': 8,'scales': [1,2], 'ratios':[1,]}"


def _ssh(phase, im_info=(100, 100, 1)):
    """Cells x = 0 and 8; face scores 0.9 (cell 0, anchor 0), 0.6 (cell 0, anchor 1), 0.8
    (cell 1, anchor 0, moved half a width left: [0, 0, 16, 16] as cell 0's), 0.7 (cell 1,
    anchor 1)."""
    layer = make_layer('type: "Python" python_param { module: "SSH.layers.proposal_layer" '
                       'layer: "ProposalLayer" param_str: "%s" }' % TWO_ANCHORS, phase=phase)
    fg = np.array([[0.9, 0.8], [0.6, 0.7]])                 # [anchor, cell]
    scores = np.concatenate([1 - fg, fg]).reshape(1, 4, 1, 2)
    deltas = np.zeros((1, 8, 1, 2))
    deltas[0, 0, 0, 1] = -0.5
    rois, sc = run_layer(layer, make_blobs([scores, deltas, [im_info]]), make_blobs(2))
    assert type(layer.py_layer) is SshProposalLayer
    return rois, sc


def test_test_phase_keeps_the_best_without_nms():
    # zero deltas: [x1, y1, x2 + 1, y2 + 1] clipped to the image; min size 0
    rois, scores = _ssh(caffepy.TEST)
    np.testing.assert_allclose(rois, [[0, 0, 0, 16, 16], [0, 0, 0, 16, 16], [0, 0, 0, 32, 24],
                                      [0, 0, 0, 24, 24]])
    np.testing.assert_allclose(scores, [[0.9], [0.8], [0.7], [0.6]])


def test_test_phase_keeps_n_dets_per_module(monkeypatch):
    monkeypatch.setattr(ssh, "cfg", ssh.default_config())
    ssh.cfg.TEST.N_DETS_PER_MODULE = 2
    rois, _ = _ssh(caffepy.TEST)
    np.testing.assert_allclose(rois, [[0, 0, 0, 16, 16], [0, 0, 0, 16, 16]])


def test_train_phase_applies_nms():
    # NMS 0.3 from the best [0, 0, 16, 16]: its duplicate (IoU 1), [0, 0, 32, 24] (289 / 825 =
    # 0.35) and [0, 0, 24, 24] (289 / 625) go
    rois, scores = _ssh(caffepy.TRAIN)
    np.testing.assert_allclose(rois, [[0, 0, 0, 16, 16]])
    np.testing.assert_allclose(scores, [[0.9]])


def test_no_box_left_gives_the_forks_placeholder_roi():
    # TRAIN min size 4 x im_info scale 100 = 400 pixels: every box is dropped
    rois, scores = _ssh(caffepy.TRAIN, im_info=(100, 100, 100))
    np.testing.assert_array_equal(rois, [[0, 0, 0, 16, 16]])
    assert scores.shape == (0, 1)


def test_setup_shapes_are_the_forks():
    layer = make_layer('type: "Python" python_param { module: "SSH.layers.proposal_layer" '
                       'layer: "ProposalLayer" param_str: "%s" }' % TWO_ANCHORS)
    bottom, top = make_blobs([np.zeros((1, 4, 1, 2)), np.zeros((1, 8, 1, 2)), [[8, 16, 1]]]), \
        make_blobs(2)
    layer.setup(bottom, top)
    assert top[0].shape == (1, 5) and top[1].shape == (1, 1, 1, 1)


# -- an excerpt of SSH/models/test_ssh.prototxt ---------------------------------------------

_MODULE = """
layer { name: "%(m)s@ssh_cls_score" type: "Convolution" bottom: "feat_%(m)s"
  top: "%(m)s@ssh_cls_score_output"
  convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "%(m)s@ssh_bbox_pred" type: "Convolution" bottom: "feat_%(m)s"
  top: "%(m)s@ssh_bbox_pred_output"
  convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer {
   bottom: "%(m)s@ssh_cls_score_output"
   top: "%(m)s@ssh_cls_score_reshape_output"
   name: "%(m)s@ssh_cls_reshape"
   type: "Reshape"
   reshape_param { shape { dim: 0 dim: 2 dim: -1 dim: 0 } }
}
layer {
  name: "%(m)s@ssh_cls_prob"
  type: "Softmax"
  bottom: "%(m)s@ssh_cls_score_reshape_output"
  top: "%(m)s@ssh_cls_prob_output"
}
layer {
  name: '%(m)s@ssh_cls_prob_reshape'
  type: 'Reshape'
  bottom: '%(m)s@ssh_cls_prob_output'
  top: '%(m)s@ssh_cls_prob_reshape_output'
  reshape_param { shape { dim: 0 dim:4  dim: -1 dim: 0 } }
}
layer {
  name: '%(m)s@ssh_proposal'
  type: 'Python'
  bottom: '%(m)s@ssh_cls_prob_reshape_output'
  bottom: '%(m)s@ssh_bbox_pred_output'
  bottom: 'im_info'
  top: '%(m)s@ssh_boxes'
  top: '%(m)s@ssh_cls_prob'
  python_param {
    module: 'SSH.layers.proposal_layer'
    layer: 'ProposalLayer'
    param_str: "{'feat_stride': %(stride)d,'scales': %(scales)s, 'ratios':[1,]}"
  }
}
"""

EXCERPT = """
name: "SSH"
input: "feat_m1"
input_shape { dim: 1 dim: 8 dim: 8 dim: 8 }
input: "feat_m2"
input_shape { dim: 1 dim: 8 dim: 4 dim: 4 }
input: "im_info"
input_shape { dim: 1 dim: 3 }
""" + _MODULE % dict(m="m1", stride=8, scales="[1,2]") \
    + _MODULE % dict(m="m2", stride=16, scales="[4,8]") + """
layer{
  name: "ssh_cls_prob"
  type: "Concat"
  bottom: "m1@ssh_cls_prob"
  bottom: "m2@ssh_cls_prob"
  top: "ssh_cls_prob"
  concat_param{
    axis: 0
  }
}
layer{
  name: "ssh_boxes"
  type: "Concat"
  bottom: "m1@ssh_boxes"
  bottom: "m2@ssh_boxes"
  top: "ssh_boxes"
  concat_param{
    axis: 0
  }
}
"""


def test_excerpt_net_summary_and_forward(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "test_ssh.prototxt"
    path.write_text(EXCERPT)
    assert main(["summary", str(path)]) == 0
    net = Net(proto_io.read_net(EXCERPT), caffe_pb2.TEST)
    rng = np.random.default_rng(0)
    for name in ("feat_m1", "feat_m2"):
        net.blobs[name].data[...] = rng.standard_normal(net.blobs[name].shape)
    net.blobs["im_info"].data[...] = [[64, 64, 1]]
    net.forward()
    # no NMS at test time: every anchor of every cell, 8 x 8 x 2 + 4 x 4 x 2
    assert net.blobs["ssh_boxes"].shape == (160, 5)
    assert net.blobs["ssh_cls_prob"].shape == (160, 1)
