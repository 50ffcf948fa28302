import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(7)
MIL = 'type: "MIL" mil_param { context_per_roi: 3 }'


def test_fields_parse():
    lp = caffe_pb2.LayerParameter()
    text_format.Parse('mil_param { context_per_roi: 10 }', lp)
    assert lp.mil_param.context_per_roi == 10 and lp.mil_param.type == caffe_pb2.MILParameter.MAX


def test_mil_takes_each_regions_best_context_box():
    x = np.array([[1.0, 5.0], [4.0, 2.0], [0.0, 2.0],        # region 0
                  [-1.0, 0.0], [-3.0, 7.0], [2.0, 7.0]])     # region 1
    layer = make_layer(MIL)
    bottom, top = make_blobs([x.reshape(6, 2, 1, 1)]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    np.testing.assert_array_equal(y.reshape(2, 2), [[4.0, 5.0], [2.0, 7.0]])
    top[0].diff[...] = np.array([1.0, 2.0, 3.0, 4.0]).reshape(2, 2, 1, 1)
    layer.backward(top, [True], bottom)
    # every tied maximum (region 1, class 1: rows 4 and 5) gets the whole top diff
    np.testing.assert_array_equal(bottom[0].diff.reshape(6, 2),
                                  [[0, 2], [1, 0], [0, 0], [0, 0], [0, 4], [3, 4]])


def test_mil_gradient():
    x = RNG.standard_normal((6, 4))
    check_layer_gradient(make_layer(MIL), make_blobs([x]), make_blobs(1))


def test_mil_refusals():
    for text, rows in ((MIL, (7, 2)), ('type: "MIL"', (6, 2)), (MIL, (6, 2, 2, 1)),
                       ('type: "MIL" mil_param { context_per_roi: 3 type: NOR }', (6, 2))):
        with pytest.raises(NetError):
            run_layer(make_layer(text), make_blobs([np.zeros(rows)]), make_blobs(1))


def test_sum_adds_bottoms_of_equal_legacy_shape():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4, 1, 1))
    layer = make_layer('type: "Sum"')
    (y,) = run_layer(layer, make_blobs([a, b]), make_blobs(1))
    np.testing.assert_allclose(y, a + b.reshape(3, 4))
    check_layer_gradient(make_layer('type: "Sum"'), make_blobs([a, b, a]), make_blobs(1))
    with pytest.raises(NetError, match="same size"):
        run_layer(make_layer('type: "Sum"'), make_blobs([a, np.zeros((4, 3))]), make_blobs(1))


def test_net_excerpt_builds(tmp_path):
    from caffepy.net import Net
    path = tmp_path / "rstar.prototxt"
    path.write_text('''
input: "feat" input_shape { dim: 2 dim: 8 }
input: "context" input_shape { dim: 20 dim: 8 }
layer { name: "cls_score" type: "InnerProduct" bottom: "feat" top: "cls_score"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "context_cls_score" type: "InnerProduct" bottom: "context" top: "context_cls_score"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "MIL_score" type: "MIL" bottom: "context_cls_score" top: "mil_context_cls_score"
  mil_param { context_per_roi: 10 } }
layer { name: "sum_scores" type: "Sum" bottom: "cls_score" bottom: "mil_context_cls_score"
  top: "sum_cls_score" }
''')
    net = Net(str(path), caffe_pb2.TEST)
    net.blobs["feat"].data[...] = RNG.standard_normal((2, 8))
    net.blobs["context"].data[...] = RNG.standard_normal((20, 8))
    net.forward()
    assert net.blobs["sum_cls_score"].shape == (2, 5)
