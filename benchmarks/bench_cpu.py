"""CPU training-step benchmark: caffepy vs PyTorch on LeNet, CIFAR10-quick and CaffeNet.

    python benchmarks/bench_cpu.py [--iters 20] [--threads N] [--profile] [--numpy-too]
                                   [--nets lenet,cifar10_quick,caffenet]

Times one forward + backward pass (the solver's inner step) of Caffe's LeNet (MNIST, batch 64)
and CIFAR10-quick (batch 100), both fed by DummyData (gaussian data, constant labels), in float32.
CaffeNet (models/caffenet, batch 16, 227x227) gets a DummyData input and a SoftmaxWithLoss.
The same nets are built with torch.nn and timed the same way when torch is installed (it is not a
caffepy dependency). ``--profile`` prints caffepy's time per layer, forward and backward.
``--numpy-too`` also times caffepy with its numba kernels switched off (the pure-numpy path),
back to back in the same process. ``--rounds R`` alternates caffepy and torch R times and prints
the medians (on a shared machine both then see the same bursts of load). ``--separate`` times
each framework in a process of its own instead (alternated R times): then neither one's OpenMP
runtime (wait policy, spinning threads) or thread pool sits beside the other's. ``--cpu-time`` times
every step by the process's CPU time and reports the fastest step (with ``--threads 1``: a figure
that the other processes of a loaded machine disturb far less than wall-clock time).
"""
import argparse
import os
import subprocess
import sys
import time


def _set_threads(argv):
    """``--threads N`` must be applied before numpy loads its BLAS."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv) or a.startswith("--threads="):
            n = a.split("=", 1)[1] if "=" in a else argv[i + 1]
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = n
    # what ``import caffepy`` sets when it is imported before numpy (numpy comes first here)
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


_set_threads(sys.argv)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from caffepy.net import Net  # noqa: E402
from caffepy.proto import caffe_pb2  # noqa: E402
from google.protobuf import text_format  # noqa: E402


def _data(n, c, h, w):
    return ('layer { name: "data" type: "DummyData" top: "data" top: "label" dummy_data_param {'
            ' data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 }'
            ' shape { dim: %d dim: %d dim: %d dim: %d } shape { dim: %d } } }\n' % (n, c, h, w, n))


def _conv(name, bottom, n, k, pad=0, std=None):
    filler = 'type: "gaussian" std: %g' % std if std else 'type: "xavier"'
    return ('layer { name: "%s" type: "Convolution" bottom: "%s" top: "%s" convolution_param {'
            ' num_output: %d kernel_size: %d pad: %d stride: 1 weight_filler { %s }'
            ' bias_filler { type: "constant" } } }\n' % (name, bottom, name, n, k, pad, filler))


def _pool(name, bottom, method, k, s):
    return ('layer { name: "%s" type: "Pooling" bottom: "%s" top: "%s" pooling_param {'
            ' pool: %s kernel_size: %d stride: %d } }\n' % (name, bottom, name, method, k, s))


def _ip(name, bottom, n, std=None):
    filler = 'type: "gaussian" std: %g' % std if std else 'type: "xavier"'
    return ('layer { name: "%s" type: "InnerProduct" bottom: "%s" top: "%s" inner_product_param {'
            ' num_output: %d weight_filler { %s } bias_filler { type: "constant" } } }\n'
            % (name, bottom, name, n, filler))


def _relu(name, blob):
    return 'layer { name: "%s" type: "ReLU" bottom: "%s" top: "%s" }\n' % (name, blob, blob)


LOSS = ('layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label"'
        ' top: "loss" }\n')

LENET = ('name: "LeNet"\n' + _data(64, 1, 28, 28) + _conv("conv1", "data", 20, 5)
         + _pool("pool1", "conv1", "MAX", 2, 2) + _conv("conv2", "pool1", 50, 5)
         + _pool("pool2", "conv2", "MAX", 2, 2) + _ip("ip1", "pool2", 500) + _relu("relu1", "ip1")
         + _ip("ip2", "ip1", 10) + LOSS)

CIFAR10_QUICK = ('name: "CIFAR10_quick"\n' + _data(100, 3, 32, 32)
                 + _conv("conv1", "data", 32, 5, 2, 0.0001) + _pool("pool1", "conv1", "MAX", 3, 2)
                 + _relu("relu1", "pool1") + _conv("conv2", "pool1", 32, 5, 2, 0.01)
                 + _relu("relu2", "conv2") + _pool("pool2", "conv2", "AVE", 3, 2)
                 + _conv("conv3", "pool2", 64, 5, 2, 0.01) + _relu("relu3", "conv3")
                 + _pool("pool3", "conv3", "AVE", 3, 2) + _ip("ip1", "pool3", 64, 0.1)
                 + _ip("ip2", "ip1", 10, 0.1) + LOSS)

def _caffenet(batch=16):
    """models/caffenet's deploy net fed by DummyData, with a SoftmaxWithLoss on fc8."""
    param = caffe_pb2.NetParameter()
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models",
                        "caffenet", "caffenet_deploy.prototxt")
    with open(path) as f:
        text_format.Parse(f.read(), param)
    body = [l for l in param.layer if l.type != "Input"]
    for layer in body:          # the deploy file has no fillers: gaussian weights, zero biases
        if layer.type in ("Convolution", "InnerProduct"):
            p = layer.convolution_param if layer.type == "Convolution" else \
                layer.inner_product_param
            p.weight_filler.type, p.weight_filler.std = "gaussian", 0.01
    text = ('name: "CaffeNet"\n' + _data(batch, 3, 227, 227)
            + "".join("layer { %s }\n" % text_format.MessageToString(l, as_one_line=True)
                      for l in body)
            + LOSS.replace('"ip2"', '"fc8"'))
    return text


NETS = {"lenet": LENET, "cifar10_quick": CIFAR10_QUICK, "caffenet": None}


def build_caffepy(text):
    if text is None:
        text = _caffenet()
    param = caffe_pb2.NetParameter()
    text_format.Parse(text, param)
    return Net(param, caffe_pb2.TRAIN)


CPU_TIME = [False]     # --cpu-time: the fastest step by process CPU time instead of the mean


def _timed(step, iters):
    if CPU_TIME[0]:
        best = float("inf")
        for _ in range(iters):
            start = time.process_time()
            step()
            best = min(best, time.process_time() - start)
        return best
    start = time.perf_counter()
    for _ in range(iters):
        step()
    return (time.perf_counter() - start) / iters


def time_caffepy(net, iters, warmup=3):
    def step():
        net.clear_param_diffs()
        net.forward_backward()
    for _ in range(warmup):
        step()
    return _timed(step, iters)


def profile_caffepy(net, iters):
    n = len(net.layers)
    fwd, bwd = np.zeros(n), np.zeros(n)
    for _ in range(iters):
        for i in range(n):
            t = time.perf_counter()
            net.layers[i].forward(net.bottom_vecs[i], net.top_vecs[i])
            fwd[i] += time.perf_counter() - t
        for i in range(n - 1, -1, -1):
            if net.layer_need_backward[i]:
                t = time.perf_counter()
                net.layers[i].backward(net.top_vecs[i], net.bottom_need_backward[i],
                                       net.bottom_vecs[i])
                bwd[i] += time.perf_counter() - t
    for i in range(n):
        print("    %-10s %-16s forward %7.2f ms  backward %7.2f ms"
              % (net._layer_names[i], net.layers[i].type, 1e3 * fwd[i] / iters,
                 1e3 * bwd[i] / iters))


def ab_numba(args):
    """Numba kernels on vs off, alternated in one process (the fairest comparison on a busy
    machine: both see the same load)."""
    from caffepy.math import kernels
    for name in args.nets.split(","):
        net = build_caffepy(NETS[name])
        res = {True: [], False: []}
        for flag in (True, False):
            kernels.set_enabled(flag)
            time_caffepy(net, 1, warmup=1)
        for _ in range(args.ab):
            for flag in (True, False):
                kernels.set_enabled(flag)
                res[flag].append(1e3 * time_caffepy(net, args.iters, warmup=0))
        kernels.set_enabled(None)
        print("%-14s numba min %8.1f median %8.1f | numpy min %8.1f median %8.1f ms  load %s"
              % (name, min(res[True]), np.median(res[True]), min(res[False]),
                 np.median(res[False]), " ".join(open("/proc/loadavg").read().split()[:3])),
              flush=True)


def build_torch(name):
    import torch.nn as nn
    if name == "lenet":
        model = nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True), nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(True),
            nn.Linear(500, 10))
        return model, (64, 1, 28, 28)
    if name == "caffenet":
        lrn = lambda: nn.LocalResponseNorm(5, 1e-4, 0.75)  # noqa: E731
        model = nn.Sequential(
            nn.Conv2d(3, 96, 11, 4), nn.ReLU(True), nn.MaxPool2d(3, 2, ceil_mode=True), lrn(),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(True),
            nn.MaxPool2d(3, 2, ceil_mode=True), lrn(),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(True),
            nn.MaxPool2d(3, 2, ceil_mode=True), nn.Flatten(),
            nn.Linear(9216, 4096), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(4096, 1000))
        return model, (16, 3, 227, 227)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(True),
        nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(True), nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(True), nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Flatten(), nn.Linear(1024, 64), nn.Linear(64, 10))
    return model, (100, 3, 32, 32)


def time_torch(name, iters, warmup=3):
    import torch
    model, shape = build_torch(name)
    loss_fn = torch.nn.CrossEntropyLoss()
    label = torch.ones(shape[0], dtype=torch.long)

    def step():
        model.zero_grad()
        loss_fn(model(torch.randn(shape)), label).backward()
    for _ in range(warmup):
        step()
    return _timed(step, iters)


def _child(args, framework, name):
    cmd = [sys.executable, os.path.abspath(__file__), "--only", framework, "--nets", name,
           "--iters", str(args.iters)] + (["--threads", str(args.threads)] if args.threads else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def separate(args):
    """--separate: per net, ROUNDS alternations of a caffepy process and a torch process."""
    print("each framework in its own process; %s threads; %d CPUs" % (args.threads or "default",
                                                                       os.cpu_count()))
    print("%-14s %14s %14s %8s  %s" % ("net", "caffepy ms", "torch ms", "ratio", "load average"))
    for name in args.nets.split(","):
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(_child(args, "caffepy", name))
            theirs.append(_child(args, "torch", name))
        a, b = float(np.median(ours)), float(np.median(theirs))
        print("%-14s %14.1f %14.1f %8.2f  %s  (per round: %s / %s)" % (
            name, a, b, a / b, " ".join(open("/proc/loadavg").read().split()[:3]),
            " ".join("%.1f" % v for v in ours), " ".join("%.1f" % v for v in theirs)), flush=True)


def only(args):
    """--only FRAMEWORK (the child of --separate): prints ms per step of one net."""
    if args.only == "torch":
        import torch
        if args.threads:
            torch.set_num_threads(args.threads)
        ms = 1e3 * time_torch(args.nets, args.iters)
    else:
        from caffepy.math import kernels
        if args.threads:
            kernels.set_threads(args.threads)
        ms = 1e3 * time_caffepy(build_caffepy(NETS[args.nets]), args.iters)
    print("%.3f" % ms)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--nets", default="lenet,cifar10_quick")
    ap.add_argument("--profile", action="store_true", help="per-layer caffepy times")
    ap.add_argument("--threads", type=int, default=0, help="BLAS / torch threads (0: default)")
    ap.add_argument("--numpy-too", action="store_true",
                    help="also time caffepy with the numba kernels off")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate caffepy and torch ROUNDS times (--iters steps each) and print "
                         "the median of each (for a loaded machine)")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                    help="only caffepy: ROUNDS alternations of numba on / off (--iters steps "
                         "each); min and median ms per step of each")
    ap.add_argument("--cpu-time", action="store_true",
                    help="the fastest step by process CPU time (use with --threads 1)")
    ap.add_argument("--separate", action="store_true",
                    help="time each framework in a process of its own (alternated --rounds "
                         "times): no OpenMP runtime or thread pool of one sits beside the other")
    ap.add_argument("--only", choices=("caffepy", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    CPU_TIME[0] = args.cpu_time
    if args.separate:
        return separate(args)
    if args.only:
        return only(args)
    # torch first: its OpenMP runtime reads OMP_WAIT_POLICY when it loads, and caffepy's kernels
    # set PASSIVE for theirs (kernels.get); torch keeps its own default that way
    try:
        import torch
        if args.threads:
            torch.set_num_threads(args.threads)
        torch_info = "torch %s, %d threads" % (torch.__version__, torch.get_num_threads())
    except ImportError:
        torch = None
        torch_info = "torch not installed: skipped"
    from caffepy.math import kernels
    if args.threads:
        kernels.set_threads(args.threads)
    from caffepy.math import onednn
    print("numpy %s; oneDNN %s; %s; %d CPUs" % (np.__version__, onednn.version() or "off",
                                               torch_info, os.cpu_count()))
    if args.ab:
        return ab_numba(args)
    print("%-14s %14s %14s %8s %14s  %s" % ("net", "caffepy ms", "torch ms", "ratio",
                                            "numpy-path ms", "load average"))
    for name in args.nets.split(","):
        net = build_caffepy(NETS[name])
        kernels.set_enabled(None)
        ours, theirs = [], []
        for r in range(args.rounds):        # alternated, so that both share the load's bursts
            ours.append(time_caffepy(net, args.iters, warmup=3 if r == 0 else 0))
            if torch is not None:
                theirs.append(time_torch(name, args.iters, warmup=3 if r == 0 else 1))
        ours = float(np.median(ours))
        theirs = float(np.median(theirs)) if theirs else float("nan")
        plain = float("nan")
        if args.numpy_too:
            with kernels.disabled():
                plain = time_caffepy(net, args.iters)
        print("%-14s %14.1f %14.1f %8.2f %14.1f  %s" % (
            name, 1e3 * ours, 1e3 * theirs, ours / theirs, 1e3 * plain,
            " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
        if args.profile:
            profile_caffepy(net, max(1, args.iters // 2))


if __name__ == "__main__":
    main()
