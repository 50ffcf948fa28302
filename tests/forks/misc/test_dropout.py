"""Cysu/dgd_person_reid's GuidedDropout."""
import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_deterministic_keeps_guided_channels_and_rescales():
    x = np.arange(1.0, 13.0).reshape(2, 3, 2, 1)
    g = np.array([[0.5, -1.0, 2.0], [-1.0, -2.0, 0.0]]).reshape(2, 3, 1, 1)
    (y,) = run_layer(make_layer('type: "GuidedDropout"'), make_blobs([x, g]), make_blobs(1))
    want = x.copy()
    want[0] *= np.array([1, 0, 1])[:, None, None] * 3 / 2.0     # 2 of 3 kept: x 3 / 2
    want[1] = 0                                                  # none above 0: y = x * 0
    np.testing.assert_allclose(y, want)
    check_layer_gradient(make_layer('type: "GuidedDropout"'),
                         make_blobs([np.random.default_rng(0).standard_normal((2, 3, 2, 1)), g]),
                         make_blobs(1), check_bottom=[0])


def test_deterministic_in_place_backward():
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    g = np.array([[1.0, 1.0, -1.0, 1.0]])
    layer = make_layer('type: "GuidedDropout"')
    (blob, guide) = make_blobs([x, g])
    run_layer(layer, [blob, guide], [blob])
    np.testing.assert_allclose(blob.data, [[4 / 3.0, 8 / 3.0, 0, 16 / 3.0]])
    blob.diff[...] = 1.0
    layer.backward([blob], [True, False], [blob, guide])
    np.testing.assert_allclose(blob.diff, [[4 / 3.0, 4 / 3.0, 0, 4 / 3.0]])


def test_shape_error():
    with pytest.raises(NetError, match="guidance must be N x C x 1 x 1"):
        run_layer(make_layer('type: "GuidedDropout"'),
                  make_blobs([np.zeros((2, 3)), np.zeros((2, 4))]), make_blobs(1))


def _stochastic(x, g, phase):
    """The stochastic form (its type set after set-up: the schema has no guided_dropout_param)."""
    layer = make_layer('type: "GuidedDropout"', phase=phase)
    bottom, top = make_blobs([x, g]), make_blobs(1)
    layer.setup(bottom, top)
    layer.kind = "stochastic"
    layer.forward(bottom, top)
    return top[0].data.copy()


def test_stochastic_mask_and_scale():
    g = np.array([[0.0, 2.0, -2.0, 1.0]])
    p = 1 / (1 + np.exp(-g))
    x = np.ones((1, 4))
    y = _stochastic(x, g, caffepy.TRAIN)
    kept = y[0] != 0
    np.testing.assert_allclose(y[0, kept], 4 / p.sum())           # C / sum of keep probabilities
    np.testing.assert_allclose(_stochastic(x * 3, g, caffepy.TEST), x * 3)    # TEST: identity


def test_zoo_gives_the_guidance_reader_the_channel_count():
    from google.protobuf import text_format
    from caffepy.proto import caffe_pb2
    from caffepy.zoo import replace_data_layers
    net = text_format.Parse('''
      layer { name: "data" type: "Data" top: "data" data_param { batch_size: 4 } }
      layer { name: "guidance" type: "Data" top: "guidance" data_param { batch_size: 4 } }
      layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
              inner_product_param { num_output: 6 } }
      layer { name: "relu" type: "ReLU" bottom: "fc" top: "fc" }
      layer { name: "gd" type: "GuidedDropout" bottom: "fc" bottom: "guidance" top: "fc" }
    ''', caffe_pb2.NetParameter())
    out = replace_data_layers(net)
    assert list(out.layer[1].input_param.shape[0].dim) == [4, 6, 1, 1]
