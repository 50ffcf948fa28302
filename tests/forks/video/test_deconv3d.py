"""C3D v1.0's Deconvolution3D: numbers by direct scattering, gradients, a V1 file."""
import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(11)


def deconv3d_ref(x, w, b, pad, tpad, s, ts):
    """Each input voxel adds x * W[c, o] at (l ts - tp + i, h s - p + j, w s - p + k)."""
    n, c, L, H, W = x.shape
    _, o, kd, k, _ = w.shape
    out = ((L - 1) * ts - 2 * tpad + kd, (H - 1) * s - 2 * pad + k, (W - 1) * s - 2 * pad + k)
    full = np.zeros((n, o, (L - 1) * ts + kd, (H - 1) * s + k, (W - 1) * s + k))
    for l in range(L):
        for h in range(H):
            for v in range(W):
                full[:, :, l * ts:l * ts + kd, h * s:h * s + k, v * s:v * s + k] += np.einsum(
                    "nc,coijk->noijk", x[:, :, l, h, v], w)
    y = full[:, :, tpad:tpad + out[0], pad:pad + out[1], pad:pad + out[2]]
    return y + b.reshape(1, -1, 1, 1, 1)


@pytest.mark.parametrize("pad,tpad,s,ts", [(0, 0, 1, 1), (1, 1, 2, 2), (1, 0, 2, 1)])
def test_deconvolution3d_numbers_and_gradient(pad, tpad, s, ts):
    x = RNG.standard_normal((2, 3, 2, 3, 3))
    text = ('type: "Deconvolution3D" convolution_param { num_output: 2 kernel_size: 3 '
            'kernel_depth: 2 pad: %d temporal_pad: %d stride: %d temporal_stride: %d '
            'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }'
            % (pad, tpad, s, ts))
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    w, b = layer.blobs[0].data, layer.blobs[1].data
    assert w.shape == (3, 2, 2, 3, 3) and b.shape == (1, 1, 1, 1, 2)
    np.testing.assert_allclose(y, deconv3d_ref(x, w, b.ravel(), pad, tpad, s, ts), rtol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_deconvolution3d_in_a_v1_file():
    text = """
name: "v2v"
input: "data" input_shape { dim: 1 dim: 2 dim: 2 dim: 3 dim: 3 }
layers { name: "deconv" type: DECONVOLUTION3D bottom: "data" top: "up"
  convolution_param { num_output: 4 kernel_size: 4 kernel_depth: 2 stride: 2 pad: 1
    temporal_stride: 2 weight_filler { type: "xavier" } } }
"""
    net = Net(proto_io.read_net(text), caffe_pb2.TEST)
    net.forward()
    assert net.blobs["up"].shape == (1, 4, 4, 6, 6)


def test_deconvolution3d_rejects_an_empty_output():
    with pytest.raises(ShapeError, match="empty"):
        make_layer('type: "Deconvolution3D" convolution_param { num_output: 1 kernel_size: 1 '
                   'kernel_depth: 1 pad: 2 }').setup(make_blobs([np.zeros((1, 1, 1, 2, 2))]),
                                                     make_blobs(1))
