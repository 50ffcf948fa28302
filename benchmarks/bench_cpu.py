"""CPU training-step benchmark: caffepy vs PyTorch on five Caffe nets, LeNet to ResNet-50.

    python benchmarks/bench_cpu.py [--iters 20] [--threads N] [--profile] [--numpy-too]
                                   [--nets lenet,cifar10_quick,caffenet,googlenet,resnet50]
                                   [--batch 8] [--rounds R] [--separate] [--check-torch]

Times one forward + backward pass (the solver's inner step, param diffs cleared first), float32,
of Caffe's LeNet (MNIST, batch 64), CIFAR10-quick (batch 100), CaffeNet (models/caffenet, batch
16, 227x227), BVLC GoogLeNet and ResNet-50 (the zoo's deploy files, 224x224, batch ``--batch``,
8 by default; ResNet-50's BatchNorm on batch statistics), each fed by DummyData (gaussian data,
constant labels) and ending in a SoftmaxWithLoss: cpu_nets.py builds them. The same nets run in
torch when it is installed (it is not a caffepy dependency): LeNet, CIFAR10-quick and CaffeNet
hand-written with torch.nn, GoogLeNet and ResNet-50 converted from the caffepy net with its
weights (torch_from_caffe.py), timed the same way (torch.randn input, CrossEntropyLoss).
``--check-torch`` times nothing: it compares the torch conversion of each net with caffepy on one
step (loss and gradients, float64 and float32; see ``check_torch``).

``--profile`` prints caffepy's time per layer, forward and backward, then the layers and layer types
that take the most, and how much of it oneDNN's convolution primitives and the reorders into and out
of their blocked formats take. ``--numpy-too`` also times caffepy with its numba kernels switched
off (the pure-numpy path), back to back in the same process. ``--rounds R`` alternates caffepy and
torch R times and prints the medians (on a shared machine both then see the same bursts of load).
``--separate`` times each framework in a process of its own instead (alternated R times): then
neither one's OpenMP runtime (wait policy, spinning threads) or thread pool sits beside the other's;
with ``--profile`` the last caffepy process prints the profile (in one process, torch's threads slow
down caffepy's threaded layers, and the profile with them). ``--cpu-time`` times every step by the
process's CPU time and reports the fastest step (with ``--threads 1``: a figure that the other
processes of a loaded machine disturb far less than wall-clock time). With ``--separate`` each net's
row is followed by its GFLOP per step (3 x the forward FLOPs of ``caffepy summary``) and both
frameworks' GFLOP/s with their share of this machine's peak (``rates.py``; ``--peak-json`` reads a
saved ``bench_peak.py --json``)."""
import argparse
import importlib.util
import os
import sys
import time


def _set_threads(argv):
    """``--threads N`` must be applied before numpy loads its BLAS."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv) or a.startswith("--threads="):
            n = a.split("=", 1)[1] if "=" in a else argv[i + 1]
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = n
    # what ``import caffepy`` sets (before numpy: read when OpenBLAS starts; after: it restarts
    # OpenBLAS's threads under it); set here too, as numpy comes first
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


_set_threads(sys.argv)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from cpu_nets import (NETS, ZOO_BATCH, ZOO_FILES, build_caffepy, build_torch,  # noqa: E402
                      net_text, parse)
import rates  # noqa: E402
from steal import run_measured  # noqa: E402
from cpu_profile import profile_caffepy  # noqa: E402


CPU_TIME = [False]     # --cpu-time: the fastest step by process CPU time instead of the mean
MIN_TIME = [0.0]       # --min-time: wall-clock seconds a timing runs at the least (more steps)


def _timed(step, iters):
    if CPU_TIME[0]:
        best = float("inf")
        for _ in range(iters):
            start = time.process_time()
            step()
            best = min(best, time.process_time() - start)
        return best
    start, n = time.perf_counter(), 0
    while n < iters or time.perf_counter() - start < MIN_TIME[0]:
        step()
        n += 1
    return (time.perf_counter() - start) / n


def time_caffepy(net, iters, warmup=3):
    def step():
        net.clear_param_diffs()
        net.forward_backward()
    for _ in range(warmup):
        step()
    return _timed(step, iters)


def ab_numba(args):
    """Numba kernels on vs off, alternated in one process (the fairest comparison on a busy
    machine: both see the same load)."""
    from caffepy.math import kernels
    for name in args.nets.split(","):
        net = build_caffepy(name, args.batch)
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


def torch_step(name, batch):
    """One training step of the torch model of ``name``: hand-written (LeNet, CIFAR10-quick,
    CaffeNet) or, for the zoo nets, converted from the caffepy net with its weights."""
    import torch
    if name in ZOO_FILES:
        from torch_from_caffe import TorchNet
        net = build_caffepy(name, batch)
        model = TorchNet(net)
        shape = tuple(net.blobs["data"].shape)
        del net
        label = torch.ones(shape[0])

        def step():
            model.zero_grad()
            model.loss(model(data=torch.randn(shape), label=label)).backward()
        return step
    model, shape = build_torch(name)
    loss_fn = torch.nn.CrossEntropyLoss()
    label = torch.ones(shape[0], dtype=torch.long)

    def step():
        model.zero_grad()
        loss_fn(model(torch.randn(shape)), label).backward()
    return step


def time_torch(step, iters, warmup=3):
    for _ in range(warmup):
        step()
    return _timed(step, iters)


def _rel(a, b):
    """max |a - b| / max |b|."""
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def _compare(name, batch, dtype):
    """(loss, torch's loss, [(relative difference, "layer[k]", max |gradient|)]) of one
    training step of caffepy and its torch conversion on the same input (no dropout)."""
    import torch
    from torch_from_caffe import TorchNet
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if dtype == np.float64 else torch.float32)
    try:
        net = build_caffepy(name, batch, dropout=False, dtype=dtype)
        model = TorchNet(net)
        net.clear_param_diffs()
        loss = float(net.forward_backward())
        tloss = model.loss(model(**{n: torch.from_numpy(net.blobs[n].data.copy())
                                    for n in model.inputs}))
        tloss.backward()
    finally:
        torch.set_default_dtype(default)
    grads = [(_rel(p.grad.numpy(), net.params[layer][k].diff), "%s[%d]" % (layer, k),
              float(np.abs(net.params[layer][k].diff).max())) for layer, k, p in model.params]
    return loss, float(tloss.detach()), grads


def check_torch(args):
    """--check-torch: caffepy against its torch conversion on one training step (differences
    relative to caffepy's largest value), in float64 (the loss and every gradient to 1e-6) and in
    float32 (the loss and the last layer's weight gradient to 1e-3; the first layer's gradient is
    printed only: float32 rounding alone moves it by up to a few percent in a deep net at random
    initialisation, in both frameworks alike, against a float64 torch run of the same weights).
    Gradients under 1e-6 of the largest one are skipped (a bias followed by BatchNorm: zero)."""
    ok = True
    for name in args.nets.split(","):
        for dtype, tol in ((np.float64, 1e-6), (np.float32, 1e-3)):
            loss, tloss, grads = _compare(name, args.batch, dtype)
            scale = max(g[2] for g in grads)
            kept = [g for g in grads if g[2] >= 1e-6 * scale]
            loss_rel = abs(tloss - loss) / abs(loss)
            if dtype == np.float64:
                worst = max(kept)
                good = max(loss_rel, worst[0]) < tol
                detail = "worst grad %s %.1e (%d of %d params)" % (worst[1], worst[0],
                                                                    len(kept), len(grads))
            else:
                last = [g for g in kept if g[1].endswith("[0]")][-1]    # a weight
                good = max(loss_rel, last[0]) < tol
                detail = "grad %s %.1e, %s %.1e" % (last[1], last[0], kept[0][1], kept[0][0])
            ok &= good
            print("%-14s %-7s loss %.6f torch %.6f rel %.1e | %s  %s" % (
                name, np.dtype(dtype).name, loss, tloss, loss_rel, detail,
                "ok" if good else "FAILED"), flush=True)
    return 0 if ok else 1


def _child(args, framework, name, profile=False):
    """(ms per step, the rest of the child's output: its profile)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--only", framework, "--nets", name,
           "--iters", str(args.iters), "--batch", str(args.batch),
           "--min-time", str(args.min_time)] + \
        (["--threads", str(args.threads)] if args.threads else []) + \
        (["--profile"] if profile else []) + (["--cpu-time"] if args.cpu_time else [])
    out, stolen = run_measured(cmd)
    rest, _, last = out.rstrip().rpartition("\n")
    return float(last), rest, stolen


def _round_text(r):
    """One round of --separate: caffepy / torch ms, the steal share, whether it was left out."""
    stolen = "?" if r[2] is None else "%.0f%%" % (100 * r[2])
    return "%.1f / %.1f, %s%s" % (r[0], r[1], stolen, "" if r[3] else " (left out)")


def separate(args):
    """--separate: per net, ROUNDS alternations of a caffepy process and a torch process, each
    round with the share of CPU time the hypervisor stole while its processes ran (steal.py);
    with --max-steal, rounds over it are left out of the medians and run again."""
    has_torch = importlib.util.find_spec("torch") is not None
    print("each framework in its own process; %s threads; %d CPUs%s"
          % (args.threads or "default", os.cpu_count(), "" if has_torch else
             "; torch not installed: skipped"))
    peak = rates.load_peak(args.peak_json)
    top = rates.peak_for(peak, args.threads or os.cpu_count())
    print(rates.describe(peak))
    print("%-14s %14s %14s %8s  %s" % ("net", "caffepy ms", "torch ms", "ratio", "load average"))
    for name in args.nets.split(","):
        gflop = rates.train_gflop(parse(net_text(name, args.batch)))
        rounds = []         # (caffepy ms, torch ms, the larger steal share of the two, kept)
        while sum(r[3] for r in rounds) < args.rounds and len(rounds) < args.rounds * args.tries:
            last = sum(r[3] for r in rounds) == args.rounds - 1
            ms, profile, s1 = _child(args, "caffepy", name, args.profile and last)
            tms, s2 = float("nan"), None
            if has_torch:
                tms, _, s2 = _child(args, "torch", name)
            stolen = max([v for v in (s1, s2) if v is not None], default=None)
            quiet = args.max_steal is None or stolen is None or stolen <= args.max_steal
            rounds.append((ms, tms, stolen, quiet))
        kept = [r for r in rounds if r[3]] or rounds
        a = float(np.median([r[0] for r in kept]))
        b = float(np.median([r[1] for r in kept])) if has_torch else float("nan")
        print("%-14s %14.1f %14.1f %8.2f  %s  (per round, caffepy / torch ms, steal: %s)" % (
            name, a, b, a / b, " ".join(open("/proc/loadavg").read().split()[:3]),
            "; ".join(_round_text(r) for r in rounds)), flush=True)
        print("%-14s %.2f GFLOP per step (3 x forward); GFLOP/s (share of peak): caffepy %s  "
              "torch %s" % (name, gflop, rates.cell(gflop, a, top), rates.cell(gflop, b, top)),
              flush=True)
        if profile:
            print(profile, flush=True)


def only(args):
    """--only FRAMEWORK (the child of --separate): prints ms per step of one net (last), after
    caffepy's profile with --profile."""
    if args.only == "torch":
        import torch
        if args.threads:
            torch.set_num_threads(args.threads)
        ms = 1e3 * time_torch(torch_step(args.nets, args.batch), args.iters)
    else:
        from caffepy.math import kernels
        if args.threads:
            kernels.set_threads(args.threads)
        net = build_caffepy(args.nets, args.batch)
        ms = 1e3 * time_caffepy(net, args.iters)
        if args.profile:
            profile_caffepy(net, max(1, args.iters // 2))
    print("%.3f" % ms)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="time at least this many seconds of steps (more than --iters for a "
                         "small net; a short window catches one burst of the machine's load)")
    ap.add_argument("--nets", default="lenet,cifar10_quick",
                    help="comma-separated, of: %s" % ",".join(NETS))
    ap.add_argument("--batch", type=int, default=ZOO_BATCH,
                    help="batch size of googlenet and resnet50 (default %(default)s)")
    ap.add_argument("--check-torch", action="store_true",
                    help="compare the torch conversion of each net with caffepy (loss and "
                         "gradients of one step) instead of timing")
    ap.add_argument("--profile", action="store_true",
                    help="per-layer caffepy times (with --separate: of its last process)")
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
    ap.add_argument("--max-steal", type=float, default=None, metavar="SHARE",
                    help="--separate: a round in which either process saw more of the machine's "
                         "CPU time stolen by the hypervisor than SHARE (0.02: 2%%) is left out of "
                         "the medians and run again, at most --tries x --rounds rounds in all")
    ap.add_argument("--tries", type=int, default=3,
                    help="--max-steal: at most this many times --rounds rounds per net")
    ap.add_argument("--peak-json", default=None, metavar="FILE",
                    help="--separate: bench_peak.py --json output (default: time the FMA loop)")
    ap.add_argument("--only", choices=("caffepy", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    CPU_TIME[0] = args.cpu_time
    MIN_TIME[0] = args.min_time
    for name in args.nets.split(","):
        if name not in NETS:
            ap.error("unknown net %r (one of %s)" % (name, ",".join(NETS)))
    if args.check_torch:
        if importlib.util.find_spec("torch") is None:
            print("torch not installed: nothing to check")
            return 0
        return check_torch(args)
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
        net = build_caffepy(name, args.batch)
        step = torch_step(name, args.batch) if torch is not None else None
        kernels.set_enabled(None)
        ours, theirs = [], []
        for r in range(args.rounds):        # alternated, so that both share the load's bursts
            ours.append(time_caffepy(net, args.iters, warmup=3 if r == 0 else 0))
            if step is not None:
                theirs.append(time_torch(step, args.iters, warmup=3 if r == 0 else 0))
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
    sys.exit(main())
