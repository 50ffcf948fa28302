"""TSN's caffe (yjxiong/caffe): Gather, MultilabelLogisticLoss and Eltwise's STOCHASTIC_SUM
(forks/video/tsn.py), its memory and solver fields, and the SegData input of caffepy.zoo; CMU
caffe_train's CPMData input."""
import numpy as np
import pytest

from caffepy import zoo
from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text, read_solver
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


def _stochastic_sum(phase, coeffs):
    text = 'type: "Eltwise" eltwise_param { operation: STOCHASTIC_SUM %s }' % " ".join(
        "coeff: %g" % c for c in coeffs)
    return make_layer(text, phase=phase)


def test_stochastic_sum_at_test_is_the_survival_weighted_sum():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    (y,) = run_layer(_stochastic_sum(caffe_pb2.TEST, [1, 0.25]), make_blobs([a, b]),
                     make_blobs(1))
    np.testing.assert_allclose(y, a + 0.25 * b, rtol=1e-12)
    check_layer_gradient(_stochastic_sum(caffe_pb2.TEST, [1, 0.25]), make_blobs([a, b]),
                         make_blobs(1))


def test_stochastic_sum_in_train_keeps_each_bottom_with_its_probability():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    layer = _stochastic_sum(caffe_pb2.TRAIN, [1, 0.5])
    bottom, top = make_blobs([a, b]), make_blobs(1)
    layer.setup(bottom, top)
    kept_b = 0
    for _ in range(400):
        layer.forward(bottom, top)
        assert layer.kept[0]                         # u < 1 <= c: always kept
        want = a + b if layer.kept[1] else a
        np.testing.assert_allclose(top[0].data, want, rtol=1e-12)
        top[0].diff[...] = 1.0
        layer.backward(top, [True, True], bottom)
        np.testing.assert_array_equal(bottom[0].diff, 1.0)
        np.testing.assert_array_equal(bottom[1].diff, 1.0 if layer.kept[1] else 0.0)
        kept_b += layer.kept[1]
    assert 150 < kept_b < 250                        # binomial(400, 0.5): mean 200, sd 10


def test_plain_eltwise_refuses_an_operation_it_does_not_compute():
    for op in ("DIV", "MIN"):
        with pytest.raises(NetError, match="operation %s is not computed" % op):
            make_layer('type: "Eltwise" eltwise_param { operation: %s }' % op).setup(
                make_blobs([np.ones(3), np.ones(3)]), make_blobs(1))


def test_tsn_memory_and_solver_fields_read_strictly():
    net = caffe_pb2.NetParameter()
    parse_text('''name: "tsn" mem_param { optimize_train: true optimize_test: true
      exclude_blob: "fc" } input: "x" input_shape { dim: 1 dim: 2 }
      layer { name: "fc" type: "InnerProduct" bottom: "x" top: "fc"
              inner_product_param { num_output: 2 } }''', net, filename="tsn.prototxt",
               strict=True)
    assert net.mem_param.optimize_test
    sp = read_solver('net: "tsn.prototxt" base_lr: 0.001 richness: 200 group_id: 0 group_id: 0',
                     strict=True)
    assert sp.richness == 200 and list(sp.group_id) == [0, 0]


def test_summary_still_reads_the_structure_of_a_fork_eltwise_operation(tmp_path):
    from caffepy import cli
    path = tmp_path / "div.prototxt"
    path.write_text('''input: "a" input_shape { dim: 2 dim: 3 }
      input: "b" input_shape { dim: 2 dim: 3 }
      layer { name: "s" type: "Eltwise" bottom: "a" bottom: "b" top: "s"
              eltwise_param { operation: DIV } }''')
    assert cli.main(["summary", str(path)]) == 0
    assert cli.main(["summary", str(path), "--strict"]) != 0
