"""DeconvNet's caffe (HyeonwooNoh/caffe): Unpooling, EltwiseAccuracy and its V1 files (forks/segmentation/deconvnet.py)."""
import numpy as np
import pytest

from caffepy.net import Net
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])                      # N=C=1, 2 x 2


def _unpool(text):
    return make_layer('type: "Unpooling" unpooling_param { %s }' % text)


def test_max_unpooling_with_and_without_mask():
    mask = np.array([[[[1.0, 2.0], [12.0, 15.0]]]])              # flat indices into 4 x 4
    y, = run_layer(_unpool("unpool: MAX kernel_size: 2 stride: 2 unpool_size: 4"),
                   make_blobs([X, mask]), make_blobs(1))
    want = np.zeros(16)
    want[[1, 2, 12, 15]] = [1, 2, 3, 4]
    np.testing.assert_array_equal(y.ravel(), want)
    y, = run_layer(_unpool("kernel_size: 2 stride: 2"), make_blobs([X]), make_blobs(1))
    assert y.shape == (1, 1, 5, 5)                               # max((2-1)*2+2, 2*2+1) = 5
    want = np.zeros((5, 5))
    want[0, 0], want[0, 2], want[2, 0], want[2, 2] = 1, 2, 3, 4   # each window's first cell
    np.testing.assert_array_equal(y[0, 0], want)
    check_layer_gradient(_unpool("kernel_size: 2 stride: 2 unpool_size: 4"),
                         make_blobs([X, mask]), make_blobs(1), check_bottom=[0])


@pytest.mark.parametrize("method, scale", [("AVE", 0.25), ("TILE", 1.0)])
def test_ave_and_tile_unpooling(method, scale):
    y, = run_layer(_unpool("unpool: %s kernel_size: 2 stride: 2 unpool_size: 4" % method),
                   make_blobs([X]), make_blobs(1))
    np.testing.assert_allclose(y[0, 0], np.kron(X[0, 0], np.ones((2, 2))) * scale)
    x = np.random.default_rng(2).standard_normal((2, 2, 3, 3))
    check_layer_gradient(_unpool("unpool: %s kernel_size: 3 stride: 2" % method), make_blobs([x]),
                         make_blobs(1))


def test_eltwise_accuracy():
    scores = np.zeros((1, 3, 1, 4))
    scores[0, :, 0, :] = [[0.9, 0.1, 0.5, 0.2], [0.0, 0.8, 0.5, 0.3], [0.1, 0.1, 0.0, 0.1]]
    labels = np.array([0, 2, 0, 255], float).reshape(1, 1, 1, 4)
    acc, = run_layer(make_layer('type: "EltwiseAccuracy" eltwise_accuracy_param { ignore_label: 255 }'),
                     make_blobs([scores, labels]), make_blobs(1))
    # pixel 0 right; pixel 1 wrong; pixel 2: a 0.5 / 0.5 tie ranks class 1 first -> wrong; 3 ignored
    np.testing.assert_allclose(acc.ravel(), [1 / 3.0])
    # top 2, no ignore: pixel 1's 0.1 / 0.1 tie puts class 2 in, pixel 3 (label 2) misses
    acc, = run_layer(make_layer('type: "EltwiseAccuracy" eltwise_accuracy_param { top_k: 2 }'),
                     make_blobs([scores, np.array([0, 2, 0, 2], float).reshape(1, 1, 1, 4)]),
                     make_blobs(1))
    np.testing.assert_allclose(acc.ravel(), [0.75])


V1_NET = """name: "deconv" input: "data" input_dim: 1 input_dim: 2 input_dim: 4 input_dim: 4
layers { bottom: "data" top: "bn" name: "bn" type: BN
  bn_param { scale_filler { type: "constant" value: 1 } shift_filler { type: "constant" value: 0 } } }
layers { bottom: "bn" top: "pool" top: "pool_mask" name: "pool" type: POOLING
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers { type: UNPOOLING bottom: "pool" bottom: "pool_mask" top: "unpool" name: "unpool"
  unpooling_param { unpool: MAX kernel_size: 2 stride: 2 unpool_size: 4 } }
"""


def test_v1_deconvnet_file_builds(tmp_path):
    path = tmp_path / "deconv.prototxt"
    path.write_text(V1_NET)
    net = Net(str(path), phase=1)
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 4)).astype(np.float32)
    net.blobs["data"].data[...] = x
    out = net.forward()["unpool"]
    assert [lp.type for lp in net.layers] == ["Input", "BN", "Pooling", "Unpooling"]
    bn = net.blobs["bn"].data
    # each 2 x 2 window keeps its maximum in place, zeros elsewhere
    for i in range(0, 4, 2):
        for j in range(0, 4, 2):
            win, got = bn[0, :, i:i + 2, j:j + 2], out[0, :, i:i + 2, j:j + 2]
            np.testing.assert_allclose(got.max(axis=(1, 2)), win.max(axis=(1, 2)), rtol=1e-6)
            assert np.all((got != 0).sum(axis=(1, 2)) <= 1)


@pytest.mark.parametrize("engine", ["DEFAULT", "CAFFE", "CUDNN"])
def test_unpooling_engine_changes_nothing(engine):
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 3))
    plain = "unpool: AVE kernel_size: 3 stride: 2"
    want, = run_layer(_unpool(plain), make_blobs([x]), make_blobs(1))
    got, = run_layer(_unpool(plain + " engine: " + engine), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(got, want)


def test_v1_unpooling_engine_summary_strict(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "deconv_engine.prototxt"
    path.write_text(V1_NET.replace("unpool_size: 4 }", "unpool_size: 4 engine: CAFFE }"))
    assert "engine: CAFFE" in path.read_text()
    assert main(["summary", "--strict", str(path)]) in (0, None)
    assert Net(str(path), phase=1).blobs["unpool"].shape == (1, 2, 4, 4)
