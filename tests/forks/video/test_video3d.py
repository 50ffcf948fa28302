import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, net_param, train_step

RNG = np.random.default_rng(0)


def conv3d_ref(x, w, b, pad, tpad, s, ts):
    xp = np.pad(x, [(0, 0), (0, 0), (tpad, tpad), (pad, pad), (pad, pad)])
    o, c, kd, k, _ = w.shape
    L = (xp.shape[2] - kd) // ts + 1
    H = (xp.shape[3] - k) // s + 1
    W = (xp.shape[4] - k) // s + 1
    y = np.zeros((x.shape[0], o, L, H, W))
    for l in range(L):
        for h in range(H):
            for v in range(W):
                patch = xp[:, :, l * ts:l * ts + kd, h * s:h * s + k, v * s:v * s + k]
                y[:, :, l, h, v] = np.einsum("ncijk,ocijk->no", patch, w) + b
    return y


@pytest.mark.parametrize("param_name", ["convolution3d_param", "convolution_param"])
def test_convolution3d_numbers(param_name):
    x = RNG.standard_normal((2, 3, 5, 6, 7))
    layer = make_layer('type: "Convolution3D" %s { num_output: 4 kernel_size: 3 kernel_depth: 2 '
                       'pad: 1 temporal_pad: 1 stride: 2 temporal_stride: 2 '
                       'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }'
                       % param_name)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    w, b = layer.blobs[0].data, layer.blobs[1].data
    assert w.shape == (4, 3, 2, 3, 3) and b.shape == (1, 1, 1, 1, 4)
    np.testing.assert_allclose(y, conv3d_ref(x, w, b.reshape(-1), 1, 1, 2, 2), rtol=1e-10)


def test_convolution3d_gradient():
    x = RNG.standard_normal((2, 2, 3, 4, 4))
    layer = make_layer('type: "Convolution3D" convolution3d_param { num_output: 2 kernel_size: 3 '
                       'kernel_depth: 2 pad: 1 temporal_stride: 1 weight_filler { type: "gaussian" }'
                       ' bias_filler { type: "gaussian" } }')
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def pool3d_ref(x, kind, k, kd, s, ts, pad=0):
    N, C, L, H, W = x.shape
    PL = -(-(L - kd) // ts) + 1
    PH = -(-(H + 2 * pad - k) // s) + 1
    PW = -(-(W + 2 * pad - k) // s) + 1
    y = np.zeros((N, C, PL, PH, PW))
    for pl in range(PL):
        for ph in range(PH):
            for pw in range(PW):
                l0, h0, w0 = pl * ts, ph * s - pad, pw * s - pad
                l1, h1, w1 = min(l0 + kd, L), min(h0 + k, H + pad), min(w0 + k, W + pad)
                size = (l1 - l0) * (h1 - h0) * (w1 - w0)
                win = x[:, :, l0:l1, max(h0, 0):min(h1, H), max(w0, 0):min(w1, W)]
                y[:, :, pl, ph, pw] = (win.max(axis=(2, 3, 4)) if kind == "MAX"
                                       else win.sum(axis=(2, 3, 4)) / size)
    return y


@pytest.mark.parametrize("kind,pad", [("MAX", 0), ("AVE", 0), ("AVE", 1)])
def test_pooling3d_numbers_and_gradient(kind, pad):
    x = RNG.standard_normal((1, 2, 5, 5, 6))
    text = ('type: "Pooling3D" pooling3d_param { pool: %s kernel_size: 2 kernel_depth: 2 stride: 2 '
            'temporal_stride: 2 pad: %d }' % (kind, pad))
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, pool3d_ref(x, kind, 2, 2, 2, 2, pad), rtol=1e-12)
    assert y.shape == (1, 2, 3, 3 + pad, 3 + pad)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("kind,pad", [("MAX", 0), ("AVE", 0), ("AVE", 1)])
def test_pooling3d_kernel_past_the_input(kind, pad):
    """C3D's ceil of a ratio in (-1, 0) is 0: one output per axis, its window clipped."""
    x = RNG.standard_normal((1, 2, 2, 2, 3))
    k = 3 + 2 * pad
    text = ('type: "Pooling3D" pooling3d_param { pool: %s kernel_size: %d kernel_depth: 3 '
            'stride: 2 temporal_stride: 2 pad: %d }' % (kind, k, pad))
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 2, 1, 1, 1)
    np.testing.assert_allclose(y, pool3d_ref(x, kind, k, 3, 2, 2, pad), rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_pooling3d_rejects_max_with_pad():
    with pytest.raises(NetError, match="AVE"):
        make_layer('type: "Pooling3D" pooling3d_param { pool: MAX kernel_size: 2 kernel_depth: 1 '
                   'pad: 1 }').setup(make_blobs([np.zeros((1, 1, 2, 4, 4))]), make_blobs(1))


# A C3D v1.0 net in its own V1 format (facts of its c3d_*_frm.prototxt: VIDEO_DATA with
# image_data_param new_length / crop_size, CONVOLUTION3D and POOLING3D with 3-D fields in
# convolution_param / pooling_param), shrunk to two conv groups.
C3D_V1 = """
name: "C3D-mini"
layers { name: "data" type: VIDEO_DATA top: "data" top: "label"
  image_data_param { source: "list.txt" use_image: true batch_size: 4 crop_size: 16
                     new_height: 20 new_width: 24 new_length: 4 mirror: false } }
layers { name: "conv1a" type: CONVOLUTION3D bottom: "data" top: "conv1a"
  blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
  convolution_param { num_output: 4 kernel_size: 3 kernel_depth: 3 pad: 1 temporal_pad: 1
    weight_filler { type: "gaussian" std: 0.1 } bias_filler { type: "constant" value: 0 } } }
layers { name: "relu1a" type: RELU bottom: "conv1a" top: "conv1a" }
layers { name: "pool1" type: POOLING3D bottom: "conv1a" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 kernel_depth: 1 stride: 2 temporal_stride: 1 } }
layers { name: "conv2a" type: CONVOLUTION3D bottom: "pool1" top: "conv2a"
  convolution_param { num_output: 6 kernel_size: 3 kernel_depth: 3 pad: 1 temporal_pad: 1
    weight_filler { type: "gaussian" std: 0.1 } bias_filler { type: "constant" value: 1 } } }
layers { name: "relu2a" type: RELU bottom: "conv2a" top: "conv2a" }
layers { name: "pool2" type: POOLING3D bottom: "conv2a" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 kernel_depth: 2 stride: 2 temporal_stride: 2 } }
layers { name: "fc6" type: INNER_PRODUCT bottom: "pool2" top: "fc6"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.05 } } }
layers { name: "prob" type: SOFTMAX_LOSS bottom: "fc6" bottom: "label" top: "loss" }
"""


def test_c3d_v1_file_upgrades():
    param = proto_io.read_net(C3D_V1)
    assert [lp.type for lp in param.layer][:4] == ["VideoData", "Convolution3D", "ReLU",
                                                   "Pooling3D"]
    assert param.layer[1].convolution_param.kernel_depth == 3
    assert list(net_param(C3D_V1).layer[0].input_param.shape[0].dim) == [1, 3, 4, 16, 16]


def test_c3d_net_forward_and_train_step():
    net = forward(C3D_V1, labels=5)
    assert net.blobs["pool2"].shape == (1, 6, 2, 4, 4)
    train_step(C3D_V1, labels=5)


# C3D v1.1 / TSN VideoData shapes
def test_video_data_input_shapes():
    tsn = ('layer { name: "data" type: "VideoData" top: "data" top: "label" video_data_param { '
           'source: "s.txt" batch_size: 8 new_length: %d num_segments: 3 modality: %s } '
           'transform_param { crop_size: 224 } }')
    assert list(net_param(tsn % (1, "RGB"), None).layer[0].input_param.shape[0].dim) == \
        [8, 9, 224, 224]
    assert list(net_param(tsn % (5, "FLOW"), None).layer[0].input_param.shape[0].dim) == \
        [8, 30, 224, 224]
    c3d = ('layer { name: "data" type: "VideoData" top: "data" top: "label" video_data_param { '
           'source: "s.txt" batch_size: 10 new_length: 16 new_height: 128 new_width: 171 } '
           'transform_param { crop_size: 112 } }')
    assert list(net_param(c3d, None).layer[0].input_param.shape[0].dim) == [10, 3, 16, 112, 112]
    assert caffe_pb2.VideoDataParameter().modality == caffe_pb2.VideoDataParameter.FLOW
