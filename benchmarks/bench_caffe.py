"""BVLC Caffe itself (its ``caffe time`` tool) on the nets of bench_infer.py and bench_cpu.py.

    python benchmarks/bench_caffe.py --caffe PATH/TO/caffe [--nets googlenet,resnet50,...]
                                     [--batches 1,8] [--threads 1,2] [--iters 10] [--rounds 3]
                                     [--train-nets lenet,...] [--train-threads 2]
                                     [--peak-json FILE]

BVLC Caffe is not a caffepy dependency and nothing here builds or installs it: ``--caffe`` (or
``CAFFE_BIN``) names a ``caffe`` binary built for the CPU (``CPU_ONLY``) with the machine's
OpenBLAS. Every figure is a process of its own, ``caffe time -model NET [-weights W] -phase P
-iterations N`` with ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` = the thread count:

* inference: the deploy nets at each batch with the random weights bench_infer.py gives them
  (``deploy_with_weights``, the same files its rows use), phase TEST; the figure is the tool's
  "Average Forward pass" (its timed loop also runs a backward pass, which a net without a loss
  skips);
* training: bench_cpu.py's nets (``cpu_nets.net_text``: DummyData input, SoftmaxWithLoss), phase
  TRAIN; the figure is "Average Forward-Backward" (one forward + backward, as bench_cpu.py times
  caffepy's step).

A row is the median over ``--rounds`` processes, with each round's figure, the net's GFLOP and the
rate with its share of this machine's peak (``rates.py``). ``/proc/loadavg`` is printed before and
after.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
import rates  # noqa: E402

_AVG = {"forward": re.compile(r"Average Forward pass: ([0-9.]+) ms"),
        "train": re.compile(r"Average Forward-Backward: ([0-9.]+) ms")}


def caffe_time(binary, model, threads, iters, phase, kind, weights=None):
    """ms of one ``caffe time`` run (module doc); raises SystemExit with its log's tail."""
    n = str(threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, GLOG_logtostderr="1")
    cmd = [binary, "time", "-model", model, "-phase", phase, "-iterations", str(iters)]
    if weights:
        cmd += ["-weights", weights]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    found = _AVG[kind].search(done.stderr + done.stdout)
    if done.returncode != 0 or not found:
        raise SystemExit("caffe time failed (%s):\n%s" % (" ".join(cmd), done.stderr[-2000:]))
    return float(found.group(1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caffe", default=os.environ.get("CAFFE_BIN"),
                    help="the caffe binary (default: $CAFFE_BIN)")
    ap.add_argument("--nets", default="googlenet,resnet50,mobilenet_v1,squeezenet1_1",
                    help="deploy nets to time forward ('' for none)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--train-nets", default="",
                    help="bench_cpu.py nets to time a training step of (e.g. lenet,caffenet)")
    ap.add_argument("--train-threads", default="2")
    ap.add_argument("--train-batch", type=int, default=None,
                    help="batch of googlenet / resnet50 training (default: bench_cpu.py's)")
    ap.add_argument("--peak-json", default=None, metavar="FILE")
    a = ap.parse_args(argv)
    if not a.caffe or not os.access(a.caffe, os.X_OK):
        ap.error("--caffe (or CAFFE_BIN) must name an executable caffe binary")
    peak = rates.load_peak(a.peak_json)
    print(rates.describe(peak))
    print("loadavg before: %s" % open("/proc/loadavg").read().strip(), flush=True)
    print("| net | batch | threads | BVLC Caffe ms | rounds | GFLOP | GFLOP/s (share of peak) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        if a.nets:
            import bench_infer
            for name in a.nets.split(","):
                for batch in [int(b) for b in a.batches.split(",")]:
                    proto, _, weights = bench_infer.deploy_with_weights(name, batch, tmp)
                    gflop = rates.forward_gflop(proto)
                    for n in [int(t) for t in a.threads.split(",")]:
                        times = [caffe_time(a.caffe, proto, n, a.iters, "TEST", "forward",
                                            weights) for _ in range(a.rounds)]
                        print(rates.median_row(name + " forward", batch, n, times, gflop, peak), flush=True)
        if a.train_nets:
            import cpu_nets
            for name in a.train_nets.split(","):
                batch = a.train_batch or cpu_nets.ZOO_BATCH
                text = cpu_nets.net_text(name, batch)
                path = os.path.join(tmp, "%s_train.prototxt" % name)
                with open(path, "w") as f:
                    f.write(text)
                param = cpu_nets.parse(text)
                gflop = rates.train_gflop(param)
                data = [l for l in param.layer if l.type == "DummyData"]
                shown = data[0].dummy_data_param.shape[0].dim[0] if data else "-"
                for n in [int(t) for t in a.train_threads.split(",")]:
                    times = [caffe_time(a.caffe, path, n, a.iters, "TRAIN", "train")
                             for _ in range(a.rounds)]
                    print(rates.median_row(name + " train step", shown, n, times, gflop, peak),
                          flush=True)
    print("loadavg after: %s" % open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
