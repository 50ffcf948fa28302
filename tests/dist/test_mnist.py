"""ASYNC and SSP (staleness 2) with 4 worker groups train Caffe's LeNet (20/50/500) on MNIST to
>= 97.5%.

The solver is Caffe's lenet_solver (SGD, momentum 0.9, weight decay 5e-4, "inv" policy) at half its
base_lr: with 4 groups applying gradients on arrival, a gradient is up to 3 updates stale, which
acts as extra momentum, and at base_lr 0.01 the run diverges within 25 steps. Each group runs 500
steps of 32 images (2000 server updates, 1.1 epochs; about 35 s a mode on 2 cores). Measured on 2
cores: ASYNC 98.4% and 98.8% (random_seed 1 and 2; ASYNC's arrival order varies between runs too),
SSP 98.1%, 98.5% and 98.1% (random_seed 1, 2, 3), so the bar is 97.5%. Longer runs of the same
solver (steps of 64 images per group): 1000 steps gave 98.5-99.1% (ASYNC, five runs) and 98.8-98.9%
(SSP, two runs); 1250 and 1500 steps 99.0% for both (the setting of
models/lenet/lenet_dist_solver.prototxt, EXAMPLE_STEPS). A single process at lr 0.01 needs about
2500 iterations of 64 for 98.4-98.6%.

Each mode is one self-contained process (this file run as a script), so it runs as a background
chain (tests/background.py) beside the rest of the suite; the test checks the JSON it wrote."""
import argparse
import json
import os
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if __name__ == "__main__":
    sys.path[:0] = [HERE, ROOT]
import nets  # noqa: E402
from caffepy import dist  # noqa: E402
from caffepy.data.idx import read_mnist  # noqa: E402
from caffepy.net import Net  # noqa: E402
from caffepy.proto import caffe_pb2, io as proto_io  # noqa: E402
from caffepy.solvers import get_solver  # noqa: E402
from tests import background  # noqa: E402
from tests.conftest import SHARED  # noqa: E402

LENET = """name: "LeNet"
layer { name: "mnist" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: %(batch)d channels: 1 height: 28 width: 28 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 20 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
        convolution_param { num_output: 50 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
        inner_product_param { num_output: 500 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" include { phase: TRAIN } }
layer { name: "acc" type: "Accuracy" bottom: "ip2" bottom: "label" top: "acc" include { phase: TEST } }
"""
SOLVER = """type: "SGD" base_lr: 0.005 momentum: 0.9 weight_decay: 0.0005 lr_policy: "inv" gamma: 0.0001 power: 0.75
max_iter: %d random_seed: 1 display: 50 snapshot_after_train: false"""
STEPS, BATCH = 500, 32    # per group: 4 groups x 500 x 32 = 1.1 epochs
EXAMPLE_STEPS = 1500      # models/lenet/lenet_dist_solver.prototxt: the 99.0% setting above


MODES = [("ASYNC", 0), ("SSP", 2)]


def _key(mode, staleness):
    return "test_mnist.py::test_lenet_mnist[%s-%d]" % (mode, staleness)


def _mnist(d):
    tr = read_mnist(d + "/train-images-idx3-ubyte.gz", d + "/train-labels-idx1-ubyte.gz")
    te = read_mnist(d + "/t10k-images-idx3-ubyte.gz", d + "/t10k-labels-idx1-ubyte.gz")
    prep = lambda im: (im.astype(np.float32) / 255.0)[:, None]
    return prep(tr[0]), tr[1].astype(np.float32), prep(te[0]), te[1].astype(np.float32)


def accuracy(params, xt, yt):
    net = Net(proto_io.read_net(LENET % {"batch": 1000}), phase=caffe_pb2.TEST)
    for blob, p in zip(net.learnable_params, params):
        blob.data[...] = p.data
    net.layers[0].reset(xt, yt)
    return float(np.mean([net.forward()["acc"] for _ in range(len(yt) // 1000)]))


def train(mode, staleness, workspace, mnist_dir):
    """Train LeNet with 4 worker groups in ``mode``; what the test checks, as a dict."""
    x, y, xt, yt = _mnist(mnist_dir)
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text(SOLVER % STEPS, param)
    param.net_param.CopyFrom(proto_io.read_net(LENET % {"batch": BATCH}))
    solver = get_solver(param)
    c = nets.cluster(nworker_groups=4, nservers_per_group=2, consistency=mode, staleness=staleness,
                     workspace=workspace)
    n = len(y) - len(y) % (4 * BATCH)
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x[:n], y[:n]))
    return {"step": result.step, "max_staleness": result.max_staleness,
            "seconds": result.seconds, "accuracy": accuracy(solver.net.learnable_params, xt, yt)}


def _chain(mode, staleness):
    def make(work):
        mnist = os.path.join(SHARED, "datasets", "mnist")
        if not os.path.isdir(mnist):
            return None                     # the test skips
        argv = [sys.executable, os.path.abspath(__file__), "--mode", mode, "--staleness",
                str(staleness), "--mnist_dir", mnist, "--workspace", os.path.join(work, "ws"),
                "--json", os.path.join(work, "result.json")]
        return background.Chain([(argv, os.path.join(work, "train.log"))], work,
                                background.tree_env())
    return make


for _mode, _staleness in MODES:
    background.job(_key(_mode, _staleness))(_chain(_mode, _staleness))


@pytest.mark.slow
@pytest.mark.parametrize("mode,staleness", MODES)
def test_lenet_mnist(tmp_path, shared, mode, staleness):
    shared("datasets", "mnist")
    _, r = background.chain_json(_key(mode, staleness), tmp_path, 1800, "train.log",
                                 "result.json")
    assert r["step"] == STEPS
    if mode == "SSP":
        assert r["max_staleness"] <= staleness
    print("%s accuracy %.4f in %.0f s" % (mode, r["accuracy"], r["seconds"]))
    assert r["accuracy"] >= 0.975, r


def main(argv=None):
    ap = argparse.ArgumentParser(description="LeNet on MNIST, 4 worker groups, ASYNC or SSP")
    ap.add_argument("--mode", choices=[m for m, _ in MODES], required=True)
    ap.add_argument("--staleness", type=int, default=0)
    ap.add_argument("--mnist_dir", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args(argv)
    t0 = time.time()
    r = train(a.mode, a.staleness, a.workspace, a.mnist_dir)
    with open(a.json, "w") as f:
        json.dump(r, f)
    print("%s accuracy %.4f, %d steps, %.0f s" % (a.mode, r["accuracy"], r["step"],
                                                  time.time() - t0))


if __name__ == "__main__":
    main()
