import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer

NET = '''input: "x" input_shape { dim: 2 dim: 6 }
input: "t" input_shape { dim: 2 dim: 2 dim: 3 }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip"
  inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "r" type: "Reshape" bottom: "ip" top: "%s" reshape_param { shape { dim: 0 dim: 2 dim: -1 } } }
layer { name: "s" type: "Softmax" bottom: "%s" top: "s" }
layer { name: "loss" type: "EuclideanLoss" bottom: "s" bottom: "t" top: "loss" }
'''


def _net(tmp_path, top):
    path = tmp_path / ("%s.prototxt" % top)
    path.write_text(NET % (top, top))
    return Net(str(path), caffe_pb2.TRAIN, dtype=np.float64)


def test_in_place_reshape_matches_the_out_of_place_net(tmp_path):
    a, b = _net(tmp_path, "ip"), _net(tmp_path, "r")
    b.params["ip"][0].data[...] = a.params["ip"][0].data
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((2, 6)), rng.random((2, 2, 3))
    for _ in range(2):          # the second pass starts from the blob the first one reshaped
        for net in (a, b):
            net.blobs["x"].data[...] = x
            net.blobs["t"].data[...] = t
            net.params["ip"][0].diff[...] = 0
            net.forward()
            net.backward()
        assert a.blobs["ip"].shape == (2, 2, 3)
        np.testing.assert_allclose(a.blobs["s"].data, b.blobs["s"].data)
        np.testing.assert_allclose(a.params["ip"][0].diff, b.params["ip"][0].diff)
        np.testing.assert_allclose(a.blobs["x"].diff, b.blobs["x"].diff)


def test_in_place_reshape_layer_keeps_data_and_diff():
    layer = make_layer('type: "Reshape" bottom: "a" top: "a" reshape_param { shape { dim: -1 dim: 2 } }')
    x = np.arange(6.0).reshape(1, 6)
    (blob,) = make_blobs([x])
    run_layer(layer, [blob], [blob])
    assert blob.shape == (3, 2)
    np.testing.assert_array_equal(blob.data, x.reshape(3, 2))
    blob.diff[...] = 1
    layer.backward([blob], [True], [blob])
    np.testing.assert_array_equal(blob.diff, np.ones((3, 2)))


def test_out_of_place_same_blob_still_refused_by_the_standard_layer():
    layer = make_layer('type: "Reshape" bottom: "a" top: "b" reshape_param { shape { dim: -1 } }')
    (blob,) = make_blobs([np.zeros((2, 3))])
    with pytest.raises(NetError, match="in-place"):
        run_layer(layer, [blob], [blob])
