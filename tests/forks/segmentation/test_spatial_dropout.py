"""ENet's Python layer spatial_dropout.SpatialDropoutLayer, built in (caffepy.forks.segmentation.spatial_dropout),
and ENet's DenseImageData ``label_divide_factor`` in the input shapes caffepy.zoo gives."""
import sys

import numpy as np
import pytest

import caffepy
from caffepy import zoo
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from google.protobuf import text_format


def _layer(phase, p="0.25"):
    return make_layer('type: "Python" python_param { module: "spatial_dropout" '
                      'layer: "SpatialDropoutLayer" param_str: "{\'phase\': \'%s\', \'p\': \'%s\'}" }'
                      % (phase, p))


@pytest.fixture(autouse=True)
def _no_user_module(monkeypatch):
    monkeypatch.delitem(sys.modules, "spatial_dropout", raising=False)   # a user's module would win


def test_test_phase_scales_by_1_over_1_minus_p():
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2))
    y, = run_layer(_layer("TEST"), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x / 0.75)                  # the fork scales at test time too
    check_layer_gradient(_layer("TEST"), make_blobs([x]), make_blobs(1))


def test_train_phase_drops_whole_feature_maps():
    caffepy.set_random_seed(3)
    x = np.ones((4, 50, 3, 3))
    layer = _layer("TRAIN")
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    y = top[0].data
    per_map = y.reshape(4, 50, 9)
    assert np.all(per_map.min(axis=2) == per_map.max(axis=2))       # one factor per map
    assert set(np.unique(per_map)) <= {0.0, 1 / 0.75}
    dropped = np.mean(per_map[:, :, 0] == 0)
    assert 0.1 < dropped < 0.4                                       # p = 0.25 of 200 maps
    top[0].diff[...] = 2.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, 2.0 * y)              # same mask and scale
    with pytest.raises(CaffeError, match="p must be in") as err:   # one line naming the layer
        run_layer(_layer("TRAIN", "1.5"), make_blobs([x]), make_blobs(1))
    assert isinstance(err.value.original, ValueError)


def test_enet_label_divide_factor_shapes_the_label_input():
    lp = text_format.Parse('layer { name: "data" type: "DenseImageData" top: "data" top: "label" '
                           'dense_image_data_param { source: "x" batch_size: 4 new_height: 512 '
                           'new_width: 1024 label_divide_factor: 8 } }', caffe_pb2.NetParameter())
    inputs = zoo.replace_data_layers(lp)
    shapes = [tuple(s.dim) for s in inputs.layer[0].input_param.shape]
    assert shapes == [(4, 3, 512, 1024), (4, 1, 64, 128)]
