"""Real MNIST (../shared/datasets/mnist) through the IDX reader, prepare_mnist and the LeNet model."""
import os

import numpy as np
import pytest

from caffepy.data.idx import read_mnist, write_idx
from tests.conftest import ROOT, shared_path

TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_real_mnist_idx_parse_and_md5():
    d = shared_path("datasets", "mnist")
    from caffepy.commands.prepare_mnist import FILES, find_local
    sums = dict(line.split()[::-1] for line in open(os.path.join(d, "MD5SUMS")) if line.strip())
    for name, (md5, _) in FILES.items():
        assert sums[name + ".gz"] == md5
        assert find_local(d, name).endswith(".gz")          # MD5-checked
    for prefix, counts in (("train", TRAIN_COUNTS), ("t10k", TEST_COUNTS)):
        images, labels = read_mnist(os.path.join(d, prefix + "-images-idx3-ubyte.gz"),
                                    os.path.join(d, prefix + "-labels-idx1-ubyte.gz"))
        assert images.shape == (sum(counts), 28, 28) and images.dtype == np.uint8
        assert list(np.bincount(labels, minlength=10)) == counts
        assert images.max() == 255 and images[:, 0, 0].max() == 0     # dark borders


@pytest.mark.slow
def test_prepare_real_mnist_then_data_layer(tmp_path):
    d = shared_path("datasets", "mnist")
    from caffepy.commands.prepare_mnist import prepare
    from caffepy.proto import caffe_pb2
    from caffepy.testing import make_blobs, make_layer
    train, test = prepare(d, str(tmp_path), log=lambda m: None)
    images, labels = read_mnist(os.path.join(d, "t10k-images-idx3-ubyte.gz"),
                                os.path.join(d, "t10k-labels-idx1-ubyte.gz"))
    layer = make_layer('type: "Data" data_param { source: "%s" batch_size: 100 backend: LMDB } '
                       'transform_param { scale: 0.00390625 }' % test, np.float32, caffe_pb2.TEST)
    top = make_blobs(2, np.float32)
    layer.setup([], top)
    layer.forward([], top)
    np.testing.assert_array_equal(top[0].data[:, 0], images[:100].astype(np.float32) * np.float32(0.00390625))
    np.testing.assert_array_equal(top[1].data, labels[:100])
    layer.close()


def fake_mnist_lmdbs(base, n):
    from caffepy.data.convert import convert_mnist
    rng = np.random.default_rng(0)
    os.makedirs(os.path.join(base, "raw"))
    for split in ("train", "test"):
        write_idx(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), os.path.join(base, "raw", "i"))
        write_idx(rng.integers(0, 10, n, dtype=np.uint8), os.path.join(base, "raw", "l"))
        convert_mnist(os.path.join(base, "raw", "i"), os.path.join(base, "raw", "l"),
                      os.path.join(base, "data", "mnist", "mnist_%s_lmdb" % split), log=lambda m: None)


def check_lenet(tmp_path, monkeypatch, run_net):
    from caffepy.proto.io import read_solver
    solver = read_solver(os.path.join(ROOT, "models", "lenet", "lenet_solver.prototxt"))
    assert (solver.base_lr, solver.momentum, solver.weight_decay, solver.lr_policy) == (
        pytest.approx(0.01), pytest.approx(0.9), pytest.approx(0.0005), "inv")
    assert (solver.gamma, solver.power, solver.max_iter, solver.test_iter[0], solver.test_interval,
            solver.display, solver.snapshot) == (pytest.approx(1e-4), 0.75, 10000, 100, 500, 100, 5000)
    assert solver.net == "models/lenet/lenet_train_test.prototxt"
    net_mod = pytest.importorskip("caffepy.net")
    from caffepy.proto import caffe_pb2
    fake_mnist_lmdbs(str(tmp_path), 100)
    os.makedirs(tmp_path / "models" / "lenet")
    for f in ("lenet_train_test.prototxt",):
        (tmp_path / "models" / "lenet" / f).write_bytes(open(os.path.join(ROOT, "models", "lenet", f), "rb").read())
    monkeypatch.chdir(tmp_path)
    net = net_mod.Net(solver.net, phase=caffe_pb2.TRAIN)
    test = net_mod.Net(solver.net, phase=caffe_pb2.TEST)
    try:
        assert net.blobs["data"].shape == (64, 1, 28, 28) and net.blobs["label"].shape == (64,)
        assert test.blobs["data"].shape == (100, 1, 28, 28) and "accuracy" in test.outputs
        assert "accuracy" not in net.blobs
        if run_net:
            loss = net.forward_backward()
            assert np.isfinite(loss) and 1.5 < loss < 3.5
            assert 0 <= float(test.forward()["accuracy"]) <= 1
    finally:
        for n in (net, test):
            n.layers[0].close()


def test_lenet_model_files(tmp_path, monkeypatch):
    check_lenet(tmp_path, monkeypatch, run_net=False)


@pytest.mark.slow
def test_lenet_runs_on_its_data(tmp_path, monkeypatch):
    check_lenet(tmp_path, monkeypatch, run_net=True)
