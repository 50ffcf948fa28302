import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.gradient_check import GradientChecker

RNG = np.random.default_rng(3)


def _layer(extra="", phase=caffe_pb2.TEST, sigma=1.0):
    return make_layer('type: "ClassDistance" class_distance_param { num_output: 3 '
                      'weight_filler { type: "gaussian" std: 1 } '
                      'bias_filler { type: "constant" value: %r } %s }' % (sigma, extra),
                      phase=phase)


def test_fields_parse():
    lp = caffe_pb2.LayerParameter()
    text_format.Parse('class_distance_param { num_output: 10 update_sigma: true isotropic: true '
                      'metric: L2 center_coef: 0.1 margin_mul { policy: STEPUP value: 0.1 '
                      'step: 5000 gamma: 2 max: 0.3 } }', lp)
    p = lp.class_distance_param
    assert (p.num_output, p.margin_mul.step, p.margin_mul.policy) == (10, 5000, 1)
    assert np.isclose(p.center_coef, 0.1) and p.metric == caffe_pb2.ClassDistanceParameter.L2
    h = caffe_pb2.HDF5DataParameter()
    text_format.Parse('mirror: true crop_size: 32 mean_value: 128 scale: 0.0078125', h)
    assert h.mirror and h.crop_size == 32 and h.crop_num == 1


def test_forward_isotropic_l2_with_margin_by_hand():
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    layer = _layer("margin_mul { value: 0.5 }", phase=caffe_pb2.TRAIN, sigma=0.9999)
    bottom, top = make_blobs([x, [2, 0]]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = [[0.0, 0.0], [1.0, 1.0], [1.0, 2.0]]
    layer.forward(bottom, top)
    # squared distances: row 0: 1, 1, 4; row 1: 4, 2, 1; S = 1; labels 2 and 0 get * 1.5
    np.testing.assert_allclose(top[0].data, [[-0.5, -0.5, -3.0], [-3.0, -1.0, -0.5]])
    test = _layer("margin_mul { value: 0.5 }", sigma=0.9999)     # TEST: no margin
    test.setup(bottom, top)
    test.blobs[0].data[...] = layer.blobs[0].data
    test.forward(bottom, top)
    np.testing.assert_allclose(top[0].data, [[-0.5, -0.5, -2.0], [-2.0, -1.0, -0.5]])


def test_margin_schedule_steps_up_and_clips():
    layer = _layer("margin_mul { policy: STEPUP value: 0.1 gamma: 2 step: 2 max: 0.3 }",
                   phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([RNG.standard_normal((2, 2)), [0, 1]]), make_blobs(1)
    layer.setup(bottom, top)
    seen = []
    for _ in range(6):
        layer.forward(bottom, top)
        seen.append(layer.margin.value)
    np.testing.assert_allclose(seen, [0.1, 0.1, 0.2, 0.2, 0.3, 0.3])


def test_gradient_without_labels_at_unit_variance():
    layer = _layer(sigma=0.9999)
    bottom = make_blobs([RNG.standard_normal((4, 2, 1, 2))])
    layer.setup(bottom, make_blobs(1))
    layer.param_propagate_down[1] = False      # the fork gives the variance no diff here
    GradientChecker().check(layer, bottom, make_blobs(1), first_setup=False)


@pytest.mark.parametrize("extra", ["", "metric: IP", "isotropic: false"])
def test_gradient_with_labels_and_margin(extra):
    layer = _layer("update_sigma: true margin_mul { value: 0.3 } " + extra,
                   phase=caffe_pb2.TRAIN, sigma=1.5)
    x = RNG.standard_normal((4, 3))
    # the variance diff is d z / d s up to S / s = 1 + 1e-4 / s (isotropic) or T / s (diagonal)
    check_layer_gradient(layer, make_blobs([x, [0, 2, 1, 2]]), make_blobs(1),
                         check_bottom=[0], threshold=1e-3)


def test_center_coef_adds_the_likelihood_gradient():
    x = RNG.standard_normal((3, 2))
    y = np.array([1, 0, 1])
    diffs = []
    for coef in (0.0, 0.6):
        layer = _layer("center_coef: %r" % coef, phase=caffe_pb2.TRAIN)
        bottom, top = make_blobs([x, y]), make_blobs(1)
        layer.setup(bottom, top)
        layer.blobs[0].data[...] = [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]
        layer.forward(bottom, top)
        top[0].diff[...] = 1.0
        layer.backward(top, [True, False], bottom)
        diffs.append((bottom[0].diff.copy(), layer.blobs[0].diff.copy()))
    mu = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    np.testing.assert_allclose(diffs[1][0] - diffs[0][0], 0.6 / 3 * (x - mu[y]))
    dmu = np.zeros_like(mu)
    np.add.at(dmu, y, 0.6 / 3 * (mu[y] - x))
    np.testing.assert_allclose(diffs[1][1] - diffs[0][1], dmu)


def test_refused_options_are_one_line_errors():
    bottom = make_blobs([np.ones((2, 2))])
    for extra in ("metric: L1", "ignore_zero: true isotropic: false"):
        with pytest.raises(NetError, match="class_distance_param"):
            _layer(extra).setup(bottom, make_blobs(1))
    layer = _layer(phase=caffe_pb2.TRAIN)
    with pytest.raises(NetError, match="label 3 outside"):
        run_layer(layer, make_blobs([np.ones((2, 2)), [0, 3]]), make_blobs(1))


def test_net_excerpt_builds(tmp_path):
    from caffepy.net import Net
    path = tmp_path / "lgm.prototxt"
    path.write_text('''
input: "data" input_shape { dim: 2 dim: 4 }
input: "label" input_shape { dim: 2 }
layer { name: "logit" type: "ClassDistance" bottom: "data" bottom: "label" top: "logit"
  class_distance_param { num_output: 5 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 1.0 } update_sigma: true
    margin_mul { policy: STEPUP value: 0.1 step: 5000 gamma: 2 max: 0.3 }
    metric: L2 center_coef: 0.1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "logit" bottom: "label" top: "loss" }
''')
    net = Net(str(path), caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((2, 4))
    net.blobs["label"].data[...] = [1, 4]
    net.forward()
    net.backward()
    assert net.blobs["logit"].shape == (2, 5) and np.isfinite(net.blobs["loss"].data).all()



def test_additive_margin_schedule_by_hand():
    # margin_add STEPUP 0.5 * 2 every 2 forwards, max 1.5: beta = 0.5, 0.5, 1.0, 1.0, 1.5
    layer = _layer("margin_mul { value: 0.5 } margin_add { policy: STEPUP value: 0.5 gamma: 2 "
                   "step: 2 max: 1.5 }", phase=caffe_pb2.TRAIN, sigma=0.9999)
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    bottom, top = make_blobs([x, [2, 0]]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = [[0.0, 0.0], [1.0, 1.0], [1.0, 2.0]]
    labelled = []
    for _ in range(5):
        layer.forward(bottom, top)
        labelled.append((top[0].data[0, 2], top[0].data[1, 0]))
    # the label logits -2 become 1.5 * -2 - beta
    np.testing.assert_allclose(labelled, [(-3.0 - b, -3.0 - b) for b in (0.5, 0.5, 1.0, 1.0, 1.5)])
    np.testing.assert_allclose(top[0].data[0, :2], [-0.5, -0.5])     # other columns: no margin
    test = _layer("margin_add { value: 0.5 }", sigma=0.9999)          # TEST: none
    test.setup(bottom, top)
    test.blobs[0].data[...] = layer.blobs[0].data
    test.forward(bottom, top)
    np.testing.assert_allclose(top[0].data[0, 2], -2.0)


def test_gradient_with_additive_margin():
    layer = _layer("update_sigma: true margin_mul { value: 0.2 } margin_add { value: 0.7 }",
                   phase=caffe_pb2.TRAIN, sigma=1.5)
    check_layer_gradient(layer, make_blobs([RNG.standard_normal((3, 2)), [1, 0, 2]]),
                         make_blobs(1), check_bottom=[0], threshold=1e-3)


def test_margin_add_excerpt_summary_strict(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "lgm_add.prototxt"
    path.write_text('''
input: "data" input_shape { dim: 2 dim: 4 }
input: "label" input_shape { dim: 2 }
layer { name: "logit" type: "ClassDistance" bottom: "data" bottom: "label" top: "logit"
  class_distance_param { num_output: 10 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 1.0 } update_sigma: true
    margin_mul { policy: STEPUP value: 0.001 gamma: 10 step: 1000 max: 1 }
    margin_add { policy: STEPUP value: 0.001 gamma: 5 step: 1000 max: 3 }
    metric: L2 center_coef: 0.0003 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "logit" bottom: "label" top: "loss" }
''')
    assert main(["summary", "--strict", str(path)]) in (0, None)
