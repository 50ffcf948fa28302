"""TSN's caffe (yjxiong/caffe): Gather and MultilabelLogisticLoss (forks/video/tsn.py) and the
SegData input of caffepy.zoo; CMU caffe_train's CPMData input."""
import numpy as np

from caffepy import zoo
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_gather_passes_every_bottom_through():
    a = np.arange(6.0).reshape(2, 3)
    b = np.array([[1.0], [0.0]])
    ya, yb = run_layer(make_layer('type: "Gather"'), make_blobs([a, b]), make_blobs(2))
    np.testing.assert_array_equal(ya, a)
    np.testing.assert_array_equal(yb, b)
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2))
    check_layer_gradient(make_layer('type: "Gather"'), make_blobs([x, x[:, :1] * 2]),
                         make_blobs(2))


def test_segdata_becomes_a_stride_aligned_input():
    net = parse_text('''layer { name: "data" type: "SegData" top: "data" top: "label"
      seg_data_param { source: "train.txt" root_dir: "VOC" shuffle: true }
      transform_param { mirror: true scale_ratios: 0.8 scale_ratios: 1.2 stride: 32 } }''',
                     caffe_pb2.NetParameter())
    assert net.layer[0].seg_data_param.root_dir == "VOC"
    out = zoo.replace_data_layers(net, default_shape=(3, 250, 300))
    shapes = [tuple(s.dim) for s in out.layer[0].input_param.shape]
    assert shapes == [(1, 3, 224, 288), (1, 1, 224, 288)]     # 250 -> 7 x 32, 300 -> 9 x 32


def test_cpm_data_becomes_pose_inputs():
    # CMU caffe_train's CPMData (ZheC's pose training): 6 LMDB channels, 2 (parts + 1) label maps
    net = parse_text('''layer { name: "data" type: "CPMData" top: "data" top: "label"
      data_param { batch_size: 10 } cpm_transform_param { stride: 8 crop_size_x: 368
      crop_size_y: 320 num_parts: 56 np_in_lmdb: 17 } }''', caffe_pb2.NetParameter())
    assert net.layer[0].cpm_transform_param.max_rotate_degree == 5.0      # the fork's default
    out = zoo.replace_data_layers(net)
    assert [tuple(s.dim) for s in out.layer[0].input_param.shape] == [
        (10, 6, 320, 368), (10, 114, 40, 46)]


def test_multilabel_logistic_loss_values_and_gradient():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, (4, 5))
    lab = np.array([0, 3, 4, 1], dtype=float).reshape(4, 1, 1, 1)
    text = 'type: "MultilabelLogisticLoss"'
    (loss,) = run_layer(make_layer(text), make_blobs([p, lab]), make_blobs(1))
    hot = np.eye(5)[[0, 3, 4, 1]].astype(bool)
    np.testing.assert_allclose(loss, -(np.log(p[hot]).sum() + np.log(1 - p[~hot]).sum()) / 4)
    check_layer_gradient(make_layer(text), make_blobs([p, lab]), make_blobs(1), check_bottom=[0])
