"""MobileNet-YOLO's segmentation branch: YoloSeg, SegmentationEvaluate (forks/yolo/seg.py) and the
seg_label input of caffepy.zoo."""
import numpy as np
import pytest

from caffepy import zoo
from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import make_blobs, make_layer, run_layer

X = np.array([0.0, np.log(3.0), 0.0, 0.0]).reshape(1, 1, 2, 2)     # sigmoid: .5, .75, .5, .5
T = np.array([1.0, 0.0, 0.0, 0.0]).reshape(1, 1, 2, 2)
SEG = 'type: "YoloSeg" yolo_seg_param { object_scale: 0.2 }'


def test_yolo_seg_loss_and_the_forks_backward():
    layer = make_layer(SEG)
    bottom = make_blobs([X, T])
    loss, = run_layer(layer, bottom, make_blobs(1))
    d = np.array([0.2 * -0.5, 0.2 * 0.75, 0.1, 0.1])                # alpha (p - t)
    np.testing.assert_allclose(loss, np.sum(d ** 2), rtol=1e-6)       # 0.0425, N = 1
    # the fork's backward is d / N times the top diff (not the loss's derivative: no sigmoid
    # factor, no 2), so the numeric gradient checker does not apply; checked by hand instead
    top = make_blobs(1)
    layer.forward(bottom, top)
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff.ravel(), 2.0 * d, rtol=1e-6)
    # weighting bottom: 1 label pixel of 4: s = 1 / 3, beta = 0.2 (2 - 1/3) = 1/3 on t > 0.5
    loss, = run_layer(make_layer(SEG), make_blobs([X, T, np.array([[1.0]])]), make_blobs(1))
    np.testing.assert_allclose(loss, (0.5 / 3) ** 2 + 0.15 ** 2 + 0.1 ** 2 + 0.1 ** 2, rtol=1e-6)
    with pytest.raises(NetError, match="same count"):
        run_layer(make_layer(SEG), make_blobs([X, T[:, :, :1]]), make_blobs(1))


def test_segmentation_evaluate_iou():
    pred = np.array([[[[0.9, 0.8], [0.1, 0.0]], [[0.6, 0.7], [0.1, 0.0]]]])
    gt = np.array([[[[1, 1], [0, 0]], [[1, 0], [0, 0]]]], float)
    iou, = run_layer(make_layer('type: "SegmentationEvaluate" segmentation_evaluate_param '
                                '{ num_classes: 2 threshold: 0.5 }'),
                     make_blobs([pred, gt]), make_blobs(1))
    # class 0: pred = gt = the first row -> 1; class 1: pred the first row, gt one cell -> 1 / 2
    np.testing.assert_allclose(iou.ravel(), [1.0, 0.5])
    with pytest.raises(NetError, match="num_classes"):
        run_layer(make_layer('type: "SegmentationEvaluate"'), make_blobs([pred, gt]),
                  make_blobs(1))


def test_seg_label_input_takes_the_maps_channels():
    net = parse_text('''layer { name: "data" type: "AnnotatedData" top: "data" top: "label"
        top: "seg_label" transform_param { resize_param { height: 64 width: 64 } }
        annotated_data_param { yolo_data_type: 1 seg_scales: 8 single_class: false } data_param { batch_size: 2 } }
      layer { name: "seg" type: "Convolution" bottom: "data" top: "seg"
        convolution_param { num_output: 5 kernel_size: 8 stride: 8 } }
      layer { name: "loss" type: "YoloSeg" bottom: "seg" bottom: "seg_label" top: "l" }''',
                     caffe_pb2.NetParameter())
    out = zoo.replace_data_layers(net)
    assert list(out.layer[0].input_param.shape[2].dim) == [2, 5, 8, 8]
    net.layer[0].annotated_data_param.ClearField("single_class")    # the fork's default: true
    out = zoo.replace_data_layers(net)
    assert list(out.layer[0].input_param.shape[2].dim) == [2, 1, 8, 8]


def test_assisted_excitation_by_hand():
    from caffepy.testing import check_layer_gradient
    x = np.zeros((2, 2, 4, 4))
    label = np.zeros((2, 1, 300, 5))
    label[0, 0, 0] = [3, 0.25, 0.25, 0.5, 0.5]     # cells [int(0 * 4), int(2 + .95)) = [0, 2)
    label[1, 0, 0] = [1, 0.5, 0.5, 1.0, 1.0]       # image 1: the fork adds nothing (its indexing)
    mean = np.arange(32.0).reshape(2, 1, 4, 4)
    layer = make_layer('type: "AssistedExcitation"')
    y, = run_layer(layer, make_blobs([x, label, mean]), make_blobs(1))   # no solver: alpha 1
    want = np.zeros((4, 4))
    want[:2, :2] = mean[0, 0, :2, :2]
    np.testing.assert_array_equal(y[0, 0], want)
    np.testing.assert_array_equal(y[0, 1], want)
    np.testing.assert_array_equal(y[1], 0)
    layer.set_iter(50, 100)                        # alpha = cos(pi/2 * 50 / 75) = 0.5
    y, = run_layer(layer, make_blobs([x, label, mean]), make_blobs(1))
    np.testing.assert_allclose(y[0, 0], 0.5 * want, rtol=1e-6)
    layer.set_iter(80, 100)                        # past 0.75 max_iter: cos < 0 -> clipped to 0
    y, = run_layer(layer, make_blobs([x, label, mean]), make_blobs(1))
    np.testing.assert_array_equal(y, 0)
    check_layer_gradient(make_layer('type: "AssistedExcitation"'),
                         make_blobs([np.random.default_rng(0).standard_normal((2, 2, 4, 4)),
                                     label, mean]), make_blobs(1), check_bottom=[0])


def test_lane_data_input_shapes():
    net = parse_text('''layer { name: "data" type: "LaneData" top: "data" top: "label"
        top: "seg_label" transform_param { resize_param { height: 64 width: 32 } }
        annotated_data_param { seg_scales: 4 } data_param { batch_size: 3 } }''',
                     caffe_pb2.NetParameter())
    out = zoo.replace_data_layers(net)
    assert [list(s.dim) for s in out.layer[0].input_param.shape] == [
        [3, 3, 64, 32], [3, 1, 1, 1], [3, 1, 16, 8]]


def test_solver_gives_assisted_excitation_its_iteration():
    from caffepy.solvers import get_solver
    net = '''layer { name: "x" type: "DummyData" top: "x" top: "label" top: "mean"
        dummy_data_param { shape { dim: 1 dim: 1 dim: 2 dim: 2 } shape { dim: 1 dim: 1 dim: 300
        dim: 5 } shape { dim: 1 dim: 1 dim: 2 dim: 2 } } }
      layer { name: "ae" type: "AssistedExcitation" bottom: "x" bottom: "label" bottom: "mean"
        top: "ae" }
      layer { name: "ip" type: "InnerProduct" bottom: "ae" top: "ip"
        inner_product_param { num_output: 1 } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "ip" top: "loss" }'''
    s = get_solver('net_param { %s } base_lr: 0.1 lr_policy: "fixed" max_iter: 4 display: 0'
                   % net)
    s.step(3)                                      # the fork's Net::set_iter(iter, stop_iter)
    ae = [layer for layer in s.net.layers if layer.type == "AssistedExcitation"][0]
    assert (ae.iter, ae.max_iter) == (2, 3)
