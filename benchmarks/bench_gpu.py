"""GPU training-step benchmark: caffepy (pycuda kernels + cuBLAS) vs PyTorch eager FP32.

    python benchmarks/bench_gpu.py [--nets lenet,caffenet,googlenet,resnet50] [--iters 20]
                                   [--batch NAME=N ...] [--tf32]

One training iteration = forward + backward + SGD update (momentum 0.9), on DummyData (gaussian
images, constant labels), batch sizes of the reference solvers (LeNet 64, CaffeNet 256, GoogLeNet
32, ResNet-50 32), reported as images/s after warm-up, with the device synchronised around the
timed loop. caffepy builds the nets from models/*/..._deploy.prototxt (Input replaced by
DummyData, the final Softmax by SoftmaxWithLoss) and updates on the device
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

BATCH = {"lenet": 64, "caffenet": 256, "googlenet": 32, "resnet50": 32}
SHAPE = {"lenet": (1, 28, 28), "caffenet": (3, 227, 227), "googlenet": (3, 224, 224),
         "resnet50": (3, 224, 224)}
CLASSES = {"lenet": 10, "caffenet": 1000, "googlenet": 1000, "resnet50": 1000}


def _dummy(batch, shape):
    dims = " ".join("dim: %d" % d for d in (batch,) + shape)
    return ('layer { name: "data" type: "DummyData" top: "data" top: "label" dummy_data_param {'
            ' data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 }'
            ' shape { %s } shape { dim: %d } } }\n' % (dims, batch))


def caffepy_prototxt(name, batch):
    if name == "lenet":
        from tests.gpu.nets import LENET_LAYERS
        body = LENET_LAYERS.replace('include { phase: TEST } ', '')
        body = re.sub(r'layer \{ name: "accuracy".*?\}\s*\}', '', body, flags=re.S)
        return 'name: "LeNet"\n' + _dummy(batch, SHAPE[name]) + body
    text = open(os.path.join(ROOT, "models", name, "%s_deploy.prototxt" % name)).read()
    text = re.sub(r'(?ms)^layer \{\s*name: "\w+"\s*type: "Input".*?^\}\n', "", text)
    text = re.sub(r'(?m)^input:.*\n|^input_(shape|dim).*\n', "", text)
    text = re.sub(r'type: "Softmax"(\s*bottom: "[^"]+"\s*top: "[^"]+")',
                  r'type: "SoftmaxWithLoss"\1 bottom: "label"', text)
    return _dummy(batch, SHAPE[name]) + text


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
    return batch * iters / (time.perf_counter() - t)


def torch_model(name):
    import torch.nn as nn
    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True), nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(True),
            nn.Linear(500, 10))
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="lenet,caffenet,googlenet,resnet50")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--batch", action="append", default=[], help="NAME=N overrides a batch size")
    ap.add_argument("--tf32", action="store_true", help="TF32 GEMMs for both frameworks")
    args = ap.parse_args(argv)
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
    print("%-10s %6s %16s %16s %8s" % ("net", "batch", "caffepy img/s", "torch img/s", "ratio"))
    for name in args.nets.split(","):
        b = BATCH[name]
        ours = time_caffepy(name, b, args.iters)
        try:
            theirs = time_torch(name, b, args.iters) if have_torch else float("nan")
        except ImportError:
            theirs = float("nan")
        print("%-10s %6d %16.1f %16.1f %8.2f" % (name, b, ours, theirs, ours / theirs))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
