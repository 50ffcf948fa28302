"""GPU benchmark: caffepy (pycuda kernels + cuBLAS/cuDNN) vs PyTorch eager FP32 on the same card.

    python benchmarks/bench_gpu.py [--nets lenet,cifar10_quick,caffenet,googlenet,resnet50]
                                   [--iters 20] [--batch NAME=N ...] [--tf32]

Training: one iteration = forward + backward + SGD update (momentum 0.9), on fixed inputs set once
(gaussian images, labels 1: no data loading in either framework), batch sizes of the reference solvers (LeNet 64, CIFAR10-quick 100,
CaffeNet 256, GoogLeNet 32, ResNet-50 32), reported as images/s after warm-up, with the device
synchronised around the timed loop. Inference: the latency of one forward pass of the deploy net
at batch 1 (TEST phase; torch in eval mode under no_grad), median of ``--iters`` passes, in ms.
A net that fails is reported with its error and the next one runs. caffepy builds the nets from models/*/..._deploy.prototxt (Input replaced by
an Input with data and label tops, the final Softmax by SoftmaxWithLoss) and updates on the device
(``caffepy.gpu.solvers.apply_update``). PyTorch: the same LeNet, torchvision's alexnet (the
nearest to CaffeNet: no LRN, no groups), googlenet (no aux heads) and resnet50, FP32, TF32 off
unless ``--tf32`` (then for both). Needs a CUDA GPU, pycuda, and torch(+torchvision) for the
comparison column; it cannot run on a machine without a GPU.
"""
import argparse
import os
import re
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BATCH = {"lenet": 64, "cifar10_quick": 100, "caffenet": 256, "googlenet": 32, "resnet50": 32}
SHAPE = {"lenet": (1, 28, 28), "cifar10_quick": (3, 32, 32), "caffenet": (3, 227, 227),
         "googlenet": (3, 224, 224), "resnet50": (3, 224, 224)}
CLASSES = {"lenet": 10, "cifar10_quick": 10, "caffenet": 1000, "googlenet": 1000,
           "resnet50": 1000}
DEPLOY = {"lenet": "lenet/lenet_netspec_deploy.prototxt"}


def _inputs(batch, shape):
    dims = " ".join("dim: %d" % d for d in (batch,) + shape)
    return ('layer { name: "data" type: "Input" top: "data" top: "label" input_param {'
            ' shape { %s } shape { dim: %d } } }\n' % (dims, batch))


def caffepy_prototxt(name, batch):
    if name == "lenet":
        from tests.gpu.nets import LENET_LAYERS
        body = LENET_LAYERS.replace('include { phase: TEST } ', '')
        body = re.sub(r'layer \{ name: "accuracy".*?\}\s*\}', '', body, flags=re.S)
        return 'name: "LeNet"\n' + _inputs(batch, SHAPE[name]) + body
    text = open(deploy_path(name)).read()
    text = re.sub(r'(?ms)^layer \{\s*name: "\w+"\s*type: "Input".*?^\}\n', "", text)
    text = re.sub(r'(?m)^input:.*\n|^input_(shape|dim).*\n', "", text)
    text = re.sub(r'type: "Softmax"(\s*bottom: "[^"]+"\s*top: "[^"]+")',
                  r'type: "SoftmaxWithLoss"\1 bottom: "label"', text)
    return _inputs(batch, SHAPE[name]) + text


def deploy_path(name):
    return os.path.join(ROOT, "models", DEPLOY.get(name, "%s/%s_deploy.prototxt" % (name, name)))


def _median_ms(fn, sync, iters, warmup=3):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return 1000.0 * float(np.median(times))


def latency_caffepy(name, iters):
    """Median ms of one batch-1 forward pass of the deploy net in GPU mode."""
    import caffepy
    from caffepy import gpu
    caffepy.set_mode_gpu()
    net = caffepy.Net(deploy_path(name), caffepy.TEST)
    src = net.blobs[net.inputs[0]]
    src.reshape(1, *SHAPE[name])
    net.reshape()
    src.data[...] = np.random.default_rng(0).standard_normal(src.data.shape)
    return _median_ms(net.forward, gpu.synchronize, iters)


def latency_torch(name, iters):
    import torch
    model = torch_model(name).cuda().eval()
    x = torch.randn((1,) + SHAPE[name], device="cuda")

    def fwd():
        with torch.no_grad():
            model(x)
    return _median_ms(fwd, torch.cuda.synchronize, iters)


PROFILE = []


def _profiled(step, iters):
    """Run ``step`` ``iters`` times under cProfile and print the 20 costliest functions (own
    time): where the host-side time of an iteration goes."""
    import cProfile
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(iters):
        step()
    pr.disable()
    pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(20)


def time_caffepy(name, batch, iters, warmup=3):
    from google.protobuf import text_format

    import caffepy
    from caffepy import gpu
    from caffepy.gpu import solvers as gsolvers
    from caffepy.proto import caffe_pb2
    from caffepy.solvers import get_solver
    caffepy.set_mode_gpu()
    param = caffe_pb2.SolverParameter()
    text_format.Parse('base_lr: 0.001 momentum: 0.9 lr_policy: "fixed" display: 0 max_iter: 1 '
                      'snapshot_after_train: false type: "SGD"', param)
    text_format.Parse(caffepy_prototxt(name, batch), param.net_param)
    solver = get_solver(param)
    net = solver.net
    net.blobs["data"].data[...] = np.random.default_rng(0).standard_normal(
        net.blobs["data"].shape)
    net.blobs["label"].data[...] = 1

    def step():
        net.clear_param_diffs()
        net.forward_backward()
        gsolvers.apply_update(solver)
        solver.iter += 1
    for _ in range(warmup):
        step()
    gpu.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        step()
    gpu.synchronize()
    rate = batch * iters / (time.perf_counter() - t)
    if PROFILE:
        _profiled(step, max(2, iters // 4))
        gpu.synchronize()
    return rate


def torch_model(name):
    import torch.nn as nn
    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True), nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(True),
            nn.Linear(500, 10))
    if name == "cifar10_quick":
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(True),
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Flatten(), nn.Linear(1024, 64), nn.Linear(64, 10))
    import torchvision.models as tvm
    if name == "caffenet":
        return tvm.alexnet()
    if name == "googlenet":
        return tvm.googlenet(aux_logits=False, init_weights=True)
    return tvm.resnet50()


def time_torch(name, batch, iters, warmup=3):
    import torch
    model = torch_model(name).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn((batch,) + SHAPE[name], device="cuda")
    y = torch.ones(batch, dtype=torch.long, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return batch * iters / (time.perf_counter() - t)


def _run(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:      # a failed net is reported, the next one still runs
        return float("nan"), "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:120]
                                         if str(e).strip() else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="lenet,cifar10_quick,caffenet,googlenet,resnet50")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--batch", action="append", default=[], help="NAME=N overrides a batch size")
    ap.add_argument("--tf32", action="store_true", help="TF32 GEMMs for both frameworks")
    ap.add_argument("--profile", action="store_true",
                    help="after each caffepy training measurement, a cProfile of a few steps")
    args = ap.parse_args(argv)
    if args.profile:
        PROFILE.append(True)
    for item in args.batch:
        k, v = item.split("=")
        BATCH[k] = int(v)
    os.environ["CAFFEPY_TF32"] = "1" if args.tf32 else "0"
    try:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False
    print("%-14s %5s %14s %14s %6s | %12s %12s %6s" % (
        "net", "batch", "caffepy img/s", "torch img/s", "ratio", "caffepy ms", "torch ms",
        "ratio"))
    for name in args.nets.split(","):
        b = BATCH[name]
        ours, e1 = _run(time_caffepy, name, b, args.iters)
        theirs, e2 = _run(time_torch, name, b, args.iters) if have_torch else (float("nan"), None)
        lat, e3 = _run(latency_caffepy, name, args.iters)
        tlat, e4 = (_run(latency_torch, name, args.iters) if have_torch
                    else (float("nan"), None))
        print("%-14s %5d %14.1f %14.1f %6.2f | %12.2f %12.2f %6.2f" % (
            name, b, ours, theirs, ours / theirs, lat, tlat, tlat / lat), flush=True)
        for what, err in (("caffepy train", e1), ("torch train", e2), ("caffepy infer", e3),
                          ("torch infer", e4)):
            if err:
                print("  error (%s %s): %s" % (name, what, err), flush=True)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
