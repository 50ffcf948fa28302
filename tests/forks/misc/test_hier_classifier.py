import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.forks.misc.hier_classifier import PerClassAccuracyLayer, SoftmaxWithPerClassLossLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(11)
INFO = """category
3
   0 Ignored  0.2  0.5
   1 coat     0.3  2.0
   2 dress    0.5  1.5
"""
HIER = """clothes
5
 0 a 0.2 1
 1 b 0.2 1
 2 c 0.2 1
 3 d 0.2 1
 4 e 0.2 1
2
upper 2 1 2
lower 2 0 3
"""


def _loss(extra="", info="none.txt"):
    return make_layer('type: "SoftmaxWithPerClassLoss" loss_param { classifier_info_file: "%s" '
                      '%s }' % (info, extra))


class _LossOnly(SoftmaxWithPerClassLossLayer):
    """The probabilities top gets no gradient (as SoftmaxWithLoss's): zero it for the checker."""

    def forward_cpu(self, bottom, top):
        super().forward_cpu(bottom, top)
        top[1].data[...] = 0


def test_fields_parse():
    lp = caffe_pb2.LayerParameter()
    text_format.Parse('loss_param { ignore_label: 0 normalize: true classifier_info_file: "i.txt" '
                      'class_specific_lr: true } per_class_accuracy_param { ignore_label: 0 '
                      'classifier_info_file: "i.txt" confusion_matrix_file: "c" '
                      'use_hierarchy: true use_detailed_hier_accu: true num_grades: 10 } '
                      'image_data_mult_label_param { source: "t.txt" batch_size: 50 '
                      'new_height: 256 shuffle: true }', lp)
    assert lp.loss_param.classifier_info_file == "i.txt" and lp.loss_param.class_specific_lr
    p = lp.per_class_accuracy_param
    assert (p.num_grades, p.top_k, p.use_hierarchy) == (10, 1, True)
    assert lp.image_data_mult_label_param.batch_size == 50


def test_forward_by_hand():
    ln3 = np.log(3.0)
    x = [[0.0, ln3], [ln3, 0.0], [5.0, 1.0]]          # p = (.25, .75), (.75, .25), ...
    bottom = make_blobs([x, [1, 1, 0]])
    loss, prob = run_layer(_loss("ignore_label: 0"), bottom, make_blobs(2))
    np.testing.assert_allclose(loss, -(np.log(0.75) + np.log(0.25)) / 2)
    np.testing.assert_allclose(prob[:2], [[0.25, 0.75], [0.75, 0.25]])
    loss, _ = run_layer(_loss("ignore_label: 0 normalize: false"), bottom, make_blobs(2))
    np.testing.assert_allclose(loss, -(np.log(0.75) + np.log(0.25)) / 3)


def test_class_lr_mults_scale_each_sample(tmp_path):
    info = tmp_path / "info.txt"
    info.write_text(INFO)
    ln3 = np.log(3.0)
    bottom = make_blobs([[[0.0, ln3, -50.0], [ln3, 0.0, -50.0], [5.0, 1.0, 0.0]], [1, 2, 0]])
    top = make_blobs(2)
    layer = _loss("ignore_label: 0 class_specific_lr: true", str(info))
    run_layer(layer, bottom, top)
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    p = layer.prob[:, :, 0]
    want = (p - np.eye(3)[[1, 2, 0]]) * np.array([[2.0], [1.5], [0.0]]) * 2.0 / 2
    np.testing.assert_allclose(bottom[0].diff, want)
    plain = _loss("ignore_label: 0", str(info))
    run_layer(plain, bottom, top)
    plain.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff[:2], (p - np.eye(3)[[1, 2, 0]])[:2])


@pytest.mark.parametrize("extra", ["", "ignore_label: 1", "ignore_label: 1 normalize: false"])
def test_gradient(extra):
    layer = _LossOnly(text_format.Parse(
        'name: "L" type: "SoftmaxWithPerClassLoss" loss_param { classifier_info_file: "x" %s }'
        % extra, caffe_pb2.LayerParameter()))
    bottom = make_blobs([RNG.standard_normal((3, 4, 2)), [[0, 1], [2, 1], [3, 0]]])
    check_layer_gradient(layer, bottom, make_blobs(2), check_bottom=[0])


def test_info_file_is_named_when_missing_at_compute_time(tmp_path):
    missing = str(tmp_path / "info_category.txt")
    layer = _loss("class_specific_lr: true", missing)
    bottom, top = make_blobs([RNG.standard_normal((2, 3)), [1, 2]]), make_blobs(2)
    run_layer(layer, bottom, top)                     # the forward does not read it
    with pytest.raises(NetError, match="info_category.txt"):
        layer.backward(top, [True, False], bottom)
    with pytest.raises(NetError, match="classifier_info_file"):
        make_layer('type: "SoftmaxWithPerClassLoss"').setup(bottom, top)


def _accuracy(info_path, extra=""):
    return make_layer('type: "PerClassAccuracy" per_class_accuracy_param { ignore_label: 9 '
                      'classifier_info_file: "%s" use_hierarchy: true num_grades: 2 %s }'
                      % (info_path, extra))


def test_per_class_records_by_hand(tmp_path):
    info = tmp_path / "hier.txt"
    info.write_text(HIER)
    scores = [[0.1, 0.4, 0.35, 0.15, 0.0],     # y 2, pred 1: upper holds 2, both grades hit
              [0.5, 0.1, 0.1, 0.3, 0.0],       # y 0, pred 0: lower, hits
              [0.4, 0.3, 0.0, 0.3, 0.0],       # y 1, pred 0: lower (sum .7) misses 1
              [0.1, 0.1, 0.1, 0.1, 0.6],       # y 4 (no superclass): sums .2 < .6, pred hits
              [0.2, 0.2, 0.2, 0.2, 0.2],       # ignored
              [0.3, 0.3, 0.1, 0.1, 0.2]]       # y 1, tie: pred 1 (the larger index)
    layer = _accuracy(str(info))
    run_layer(layer, make_blobs([scores, [2, 0, 1, 4, 9, 1]]), [])
    assert list(layer.label_total) == [1, 2, 1, 0, 1] and list(layer.pred_total) == [2, 2, 0, 0, 1]
    assert layer.confusion[2, 1] == 1 and layer.confusion[1, 0] == 1 and layer.confusion[1, 1] == 1
    # last row: upper sum .4 = lower sum .4 (the first wins), upper mean .2 = lower: upper holds 1
    assert list(layer.hier_tp) == [4, 4] and layer.hier_total == 5
    np.testing.assert_allclose(layer.hierarchical_accuracy(), [0.8, 0.8])
    overall, mean = layer.accuracies(layer.label_total, layer.confusion)
    np.testing.assert_allclose([overall, mean], [3 / 5.0, (0 + 1 + 0.5 + 1) / 4])


def test_detailed_hierarchy_and_ids(tmp_path):
    info = tmp_path / "hier.txt"
    info.write_text(HIER)
    layer = _accuracy(str(info), 'use_detailed_hier_accu: true confusion_id_file: "c" '
                                 'hier_confusion_file: "h"')
    scores = [[0.1, 0.4, 0.35, 0.15, 0.0], [0.4, 0.3, 0.0, 0.3, 0.0]]
    run_layer(layer, make_blobs([scores, [2, 1], [101, 102]]), [])
    # true superclasses upper (0), upper (0); predicted by the largest max: upper, lower
    np.testing.assert_array_equal(layer.sup_confusion, [[1, 1], [0, 0]])
    assert layer.confusion_ids == [(101, 2, 1), (102, 1, 0)]
    assert layer.hier_confusion_ids == [(102, 0, 1)]
    with pytest.raises(NetError, match="no superclass"):
        layer.forward(make_blobs([[[0.1, 0.1, 0.1, 0.1, 0.6]], [4], [7]]), [])
    with pytest.raises(NetError, match="third bottom"):
        _accuracy(str(info), 'confusion_id_file: "c"').setup(make_blobs([scores, [2, 1]]), [])


def test_missing_info_file_is_one_line_at_forward(tmp_path):
    layer = _accuracy(str(tmp_path / "info_x.txt"))
    bottom = make_blobs([[[0.5, 0.5]], [1]])
    layer.setup(bottom, [])
    with pytest.raises(NetError, match="cannot read the classifier info file .*info_x.txt"):
        layer.forward(bottom, [])


NET = '''
name: "hier"
input: "data" input_shape { dim: 4 dim: 6 }
input: "label" input_shape { dim: 4 }
input: "pid" input_shape { dim: 4 }
layer { name: "fc8_category" type: "InnerProduct" bottom: "data" top: "fc8_category"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer {
  name: "loss_category"
  type: "SoftmaxWithPerClassLoss"
  bottom: "fc8_category"
  bottom: "label"
  top: "loss_category"
  top: "prob_category"
  loss_weight: 1
  loss_weight: 0
  loss_param {
      ignore_label: 0
      normalize: true
      classifier_info_file: "%(info)s"
      class_specific_lr: true
  }
}
layer {
  name: "accuracy_category"
  type: "PerClassAccuracy"
  bottom: "prob_category"
  bottom: "label"
  bottom: "pid"
  per_class_accuracy_param {
      ignore_label: 0
      classifier_info_file: "%(info)s"
      confusion_matrix_file: "conf_category"
      use_hierarchy: false
  }
}
'''


def test_net_excerpt_builds_and_trains(tmp_path):
    from caffepy.cli import main
    from caffepy.net import Net
    path = tmp_path / "hier.prototxt"
    path.write_text(NET % {"info": str(tmp_path / "info_category.txt")})
    assert main(["summary", "--strict", str(path)]) in (0, None)   # no info file needed
    (tmp_path / "info_category.txt").write_text(INFO)
    net = Net(str(path), caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((4, 6))
    net.blobs["label"].data[...] = [1, 2, 0, 1]
    net.blobs["pid"].data[...] = [10, 11, 12, 13]
    net.forward()
    net.backward()
    acc = [layer for layer in net.layers if isinstance(layer, PerClassAccuracyLayer)][0]
    assert acc.label_total.sum() == 3 and np.isfinite(net.blobs["loss_category"].data).all()
    assert np.abs(net.blobs["fc8_category"].diff[2]).sum() == 0      # the ignored sample
