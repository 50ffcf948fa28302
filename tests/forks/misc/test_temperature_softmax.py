import numpy as np
import pytest

from caffepy import fillers
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_softmax_with_temperature():
    x = np.random.default_rng(0).standard_normal((2, 4, 3))
    (y,) = run_layer(make_layer('type: "Softmax" softmax_param { temperature: 2.5 }'),
                     make_blobs([x]), make_blobs(1))
    e = np.exp(x / 2.5)
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    check_layer_gradient(make_layer('type: "Softmax" softmax_param { temperature: 0.7 }'),
                         make_blobs([x]), make_blobs(1))
    with pytest.raises(CaffeError, match="must be positive"):
        run_layer(make_layer('type: "Softmax" softmax_param { temperature: 0 }'),
                  make_blobs([x]), make_blobs(1))


def _filled(shape, text):
    p = proto_io.parse_text(text, caffe_pb2.FillerParameter())
    return fillers.get_filler(p).values(shape)


def test_imagexy_filler_both_and_single_axis_policies():
    w = _filled((4, 2 * 3 * 2), 'type: "imagexy" channels: 2 width: 3 height: 2')
    u = [2 * ((x + 1) / 3 - 0.5) for x in range(3)]
    v = [2 * ((y + 1) / 2 - 0.5) for y in range(2)]
    for c in range(2):
        for y in range(2):
            for x in range(3):
                i = c * 6 + y * 3 + x
                assert w[2 * c, i] == pytest.approx(u[x])
                assert w[2 * c + 1, i] == pytest.approx(v[y])
                others = [k for k in range(4) if k not in (2 * c, 2 * c + 1)]
                assert not w[others, i].any()
    w2 = _filled((4, 12), 'type: "imagexy" channels: 2 width: 3 height: 2 xy: "nboth2"')
    np.testing.assert_allclose(w2, -w ** 2)
    wy = _filled((2, 12), 'type: "imagexy" channels: 2 width: 3 height: 2 xy: "y"')
    np.testing.assert_allclose(wy, w[1::2])
    ones = _filled((2, 12), 'type: "imagexy" channels: 2 width: 3 height: 2 xy: "ones"')
    np.testing.assert_array_equal(ones, np.kron(np.eye(2), np.ones((1, 6))))


def test_imagexy_filler_refusals():
    with pytest.raises(CaffeError, match="must be 4 x channels"):
        _filled((4, 13), 'type: "imagexy" channels: 2 width: 3 height: 2')
    with pytest.raises(CaffeError, match="unknown xy policy"):
        _filled((2, 12), 'type: "imagexy" channels: 2 width: 3 height: 2 xy: "z"')
