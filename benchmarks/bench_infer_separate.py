"""Inference latency with each runtime in a process of its own: caffepy's optimize mode, OpenCV dnn,
onnxruntime, OpenVINO.

    python benchmarks/bench_infer_separate.py [--nets googlenet,resnet50,...] [--batches 1,8]
                                              [--threads 1,2] [--iters 10] [--rounds 3]

``bench_infer.py`` times the runtimes round-robin in one process, so that all of them see the same
moments of a shared machine's load; but each runtime's thread pool then sits beside the others'
(a spinning pool takes the cores of whichever runner is timed next: OpenCV's GoogLeNet b1 at two
threads moved between 32 and 52 ms from one run to the next). Here the parent writes, per net and
batch, the deploy prototxt at that batch, random weights (``caffepy.testing.random_weights``) as
a .caffemodel and their ONNX export (``caffepy.onnx``), then, per thread count, runs ``--rounds``
rounds; in each round one child process per runtime in turn. A child gets
``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` / ``NUMBA_NUM_THREADS`` = the
thread count and the runtime's own setting (``cv2.setNumThreads``, onnxruntime's
``intra_op_num_threads``, its pool left to spin as it does by default: alone in the process,
OpenVINO's ``INFERENCE_NUM_THREADS`` with f32 precision and the latency hint, the ONNX export
compiled for the CPU; its column is "-" where openvino is not installed),
loads the model, runs warm-up passes (optimize mode: its thread choice's exploring ones too) and
prints the median of ``--iters`` forwards. A row is the median over the rounds, with every
round's figure and the engine optimize mode ran (its default, auto: the fastest here of
caffepy, onnxruntime and openvino; ``CAFFEPY_INFER_ENGINE=caffepy|onnxruntime|openvino`` names
one: caffepy.infer.engine). ``/proc/loadavg`` is printed before and after. Each row also gives
the net's forward GFLOP and every runtime's achieved GFLOP/s with its share of this machine's
peak (``rates.py``; ``--peak-json`` reads a saved ``bench_peak.py --json``). ``--exact`` times
caffepy's exact path alone the same way (a process per figure, ``kernels.set_threads``), the
column that stands beside ``bench_caffe.py``'s BVLC Caffe figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import rates  # noqa: E402

RUNTIMES = ("optimize", "opencv", "onnxruntime", "openvino")


def _installed(runtime):
    import importlib.util
    return runtime != "openvino" or importlib.util.find_spec("openvino") is not None


def _median_ms(fn, iters):
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def child(runtime, proto, weights, model, threads, iters):
    """One runtime's median ms per forward (this process: only that runtime is loaded)."""
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    if runtime == "exact":
        from caffepy.math import kernels
        from caffepy.net import Net
        from caffepy.proto import caffe_pb2
        kernels.set_threads(threads)
        net = Net(proto, caffe_pb2.TEST, weights=weights)
        name = net.inputs[0]
        x = np.random.default_rng(1).standard_normal(net.blobs[name].shape).astype(np.float32)
        run = lambda: net.forward(**{name: x})            # noqa: E731
        warm = 2
        engine = "exact"
    elif runtime == "optimize":
        from caffepy.net import Net
        from caffepy.proto import caffe_pb2
        from bench_infer import EXPLORE_PASSES
        net = Net(proto, caffe_pb2.TEST, weights=weights, optimize=True)
        engine = net._plan.engine
        name = net.inputs[0]
        x = np.random.default_rng(1).standard_normal(net.blobs[name].shape).astype(np.float32)
        run = lambda: net.forward(**{name: x})            # noqa: E731
        warm = EXPLORE_PASSES + 2
    elif runtime == "opencv":
        import cv2
        cv2.setNumThreads(threads)
        dnn = cv2.dnn.readNetFromCaffe(proto, weights)
        dnn.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        shape = json.loads(os.environ["BENCH_INPUT_SHAPE"])
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)

        def run():
            dnn.setInput(x)
            dnn.forward()
        warm = 2
        engine = "opencv"
    elif runtime == "openvino":
        import openvino as ov
        core = ov.Core()
        compiled = core.compile_model(core.read_model(model), "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
            "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": threads})
        request = compiled.create_infer_request()
        shape = json.loads(os.environ["BENCH_INPUT_SHAPE"])
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        run = lambda: request.infer({0: x})                # noqa: E731
        warm = 2
        engine = "openvino"
    else:
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        x = np.random.default_rng(1).standard_normal(inp.shape).astype(np.float32)
        run = lambda: sess.run(None, {inp.name: x})        # noqa: E731
        warm = 2
        engine = "onnxruntime"
    for _ in range(warm):
        run()
    print("JSON " + json.dumps({"ms": _median_ms(run, iters), "engine": engine}))


def prepare(name, batch, tmp):
    """(prototxt, caffemodel, onnx path, input shape) of models/<name> at ``batch``."""
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    import bench_infer
    from caffepy import onnx as caffe_onnx
    proto, net, weights = bench_infer.deploy_with_weights(name, batch, tmp)
    model = os.path.join(tmp, "%s_%d.onnx" % (name, batch))
    caffe_onnx.export(net, model)
    return proto, weights, model, list(net.blobs[net.inputs[0]].shape)


def run_child(runtime, files, threads, iters):
    proto, weights, model, shape = files
    n = str(threads)
    env = dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n,
               NUMBA_NUM_THREADS=n, BENCH_INPUT_SHAPE=json.dumps(shape),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", runtime,
                           proto, weights, model, n, str(iters)],
                          env=env, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith("JSON "):
            return json.loads(line[5:])
    raise SystemExit("%s failed:\n%s" % (runtime, (done.stderr or done.stdout)[-2000:]))


def cases(a, tmp):
    """(name, batch, threads, files, GFLOP) for every net, batch and thread count of ``a``; each
    net and batch's files are written once (``prepare``)."""
    for name in a.nets.split(","):
        for batch in [int(b) for b in a.batches.split(",")]:
            files = prepare(name, batch, tmp)
            gflop = rates.forward_gflop(files[0])
            for n in [int(t) for t in a.threads.split(",")]:
                yield name, batch, n, files, gflop


def exact_only(a):
    """--exact: the exact path's median ms per net, batch and thread count, one process each."""
    peak = rates.load_peak(a.peak_json)
    print(rates.describe(peak), flush=True)
    print("| net | batch | threads | caffepy exact ms | rounds | GFLOP | GFLOP/s (share of peak) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch, n, files, gflop in cases(a, tmp):
            got = [run_child("exact", files, n, a.iters)["ms"] for _ in range(a.rounds)]
            print(rates.median_row(name, batch, n, got, gflop, peak), flush=True)
    print("loadavg after: %s" % open("/proc/loadavg").read().strip())
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="googlenet,resnet50,mobilenet_v1,squeezenet1_1")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--exact", action="store_true",
                    help="only caffepy's exact path (no inference mode), a process per figure: "
                         "the column to set beside bench_caffe.py's BVLC Caffe figures")
    ap.add_argument("--peak-json", default=None, metavar="FILE",
                    help="bench_peak.py --json output (default: time the FMA loop now)")
    ap.add_argument("--child", nargs=6, metavar=("RUNTIME", "PROTO", "WEIGHTS", "ONNX",
                                                  "THREADS", "ITERS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        runtime, proto, weights, model, threads, iters = a.child
        return child(runtime, proto, weights, model, int(threads), int(iters))
    print("loadavg before: %s" % open("/proc/loadavg").read().strip(), flush=True)
    if a.exact:
        return exact_only(a)
    runtimes = [r for r in RUNTIMES if _installed(r)]
    peak = rates.load_peak(a.peak_json)
    print(rates.describe(peak), flush=True)
    print("| net | batch | threads | optimize ms | OpenCV ms | onnxruntime ms | OpenVINO ms | "
          "opt / OpenCV | opt / ort | opt / OpenVINO | rounds (opt, cv, ort[, ov]) | "
          "optimize engine | GFLOP | GFLOP/s (share of peak): optimize; OpenCV; ort; OpenVINO |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch, n, files, gflop in cases(a, tmp):
            got = {r: [] for r in runtimes}
            engines = set()
            for _ in range(a.rounds):
                for r in runtimes:
                    res = run_child(r, files, n, a.iters)
                    got[r].append(res["ms"])
                    if r == "optimize":
                        engines.add(res["engine"])
            med = {r: statistics.median(v) for r, v in got.items()}
            ov_ms = med.get("openvino")
            top = rates.peak_for(peak, n)
            print("| %s | %d | %d | %.1f | %.1f | %.1f | %s | %.2f | %.2f | %s | %s | %s "
                  "| %.2f | %s |"
                  % (name, batch, n, med["optimize"], med["opencv"], med["onnxruntime"],
                     "-" if ov_ms is None else "%.1f" % ov_ms,
                     med["optimize"] / med["opencv"], med["optimize"] / med["onnxruntime"],
                     "-" if ov_ms is None else "%.2f" % (med["optimize"] / ov_ms),
                     "; ".join(", ".join("%.1f" % t for t in v)
                               for v in zip(*got.values())),
                     ", ".join(sorted(engines)), gflop,
                     "; ".join(rates.cell(gflop, med.get(r), top) for r in
                               ("optimize", "opencv", "onnxruntime", "openvino"))),
                  flush=True)
    print("loadavg after: %s" % open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
