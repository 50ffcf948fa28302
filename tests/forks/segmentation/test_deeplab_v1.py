"""DeepLab v1 (deeplab-public): Padding, softmaxloss_param, hole (dilation), strict_dim, V1 types."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


@pytest.mark.parametrize("beg, end", [(1, 2), (-1, 0)])
def test_padding(beg, end):
    x = np.arange(2 * 3 * 4, dtype=float).reshape(1, 2, 3, 4)
    text = 'type: "Padding" padding_param { pad_beg: %d pad_end: %d }' % (beg, end)
    y, = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 2, 3 + beg + end, 4 + beg + end)
    for h in range(y.shape[2]):
        for w in range(y.shape[3]):
            sh, sw = h - beg, w - beg
            want = x[0, :, sh, sw] if 0 <= sh < 3 and 0 <= sw < 4 else 0
            np.testing.assert_array_equal(y[0, :, h, w], want)
    check_layer_gradient(make_layer(text), make_blobs([x * 0.1]), make_blobs(1))


def test_softmaxloss_param_ignores_several_labels():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 1, 4))
    lab = np.array([0, 255, 2, 254], float).reshape(1, 1, 1, 4)
    text = ('type: "SoftmaxWithLoss" bottom: "x" bottom: "l" top: "loss" '
            'softmaxloss_param { ignore_label: 255 ignore_label: 254 }')
    loss, = run_layer(make_layer(text), make_blobs([x, lab]), make_blobs(1))
    p = np.exp(x[0, :, 0]) / np.exp(x[0, :, 0]).sum(axis=0)
    np.testing.assert_allclose(loss, -(np.log(p[0, 0]) + np.log(p[2, 2])) / 2, rtol=1e-6)
    check_layer_gradient(make_layer(text), make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
    with pytest.raises(NetError, match="weight_source"):
        make_layer(text.replace("ignore_label: 254", 'weight_source: "w.txt"')).setup(
            make_blobs([x, lab]), make_blobs(1))


V1 = """name: "v1" input: "data" input_dim: 1 input_dim: 1 input_dim: 7 input_dim: 7
layers { bottom: "data" top: "conv" name: "conv" type: CONVOLUTION strict_dim: false
  convolution_param { num_output: 2 kernel_size: 3 hole: 2 } }
layers { bottom: "conv" top: "pad" name: "pad" type: PADDING padding_param { pad_beg: 1 pad_end: 1 } }
layers { bottom: "pad" top: "up" name: "up" type: INTERP interp_param { zoom_factor: 2 } }
"""


def test_v1_deeplab_file_hole_and_strict_dim(tmp_path):
    path = tmp_path / "v1.prototxt"
    path.write_text(V1)
    net = Net(str(path), phase=caffe_pb2.TEST)
    assert net.blobs["conv"].shape == (1, 2, 3, 3)             # 7 - 2 * (3 - 1) = 3: hole is dilation
    assert net.blobs["pad"].shape == (1, 2, 5, 5)
    assert [l.type for l in net.layers] == ["Input", "Convolution", "Padding", "Interp"]
    # strict_dim: false loads a same-count blob of another shape (DeepLab's fc6 as a conv)
    src = caffe_pb2.NetParameter()
    lp = src.layer.add()
    lp.name = "conv"
    w = np.arange(18, dtype=np.float32)
    for arr in (w, np.zeros(2, np.float32)):
        bp = lp.blobs.add()
        bp.shape.dim.extend([1, arr.size])
        bp.data.extend(arr.tolist())
    net.copy_trained_layers_from(src)
    np.testing.assert_array_equal(net.params["conv"][0].data.ravel(), w)
