"""CPU inference benchmark: caffepy (exact, optimize mode) vs OpenCV dnn, onnxruntime, OpenVINO.

The zoo deploy nets (--nets).

    python benchmarks/bench_infer.py [--nets googlenet,resnet50,mobilenet_v1,squeezenet1_1]
                                     [--batches 1,8] [--threads 1,2] [--iters 3] [--profile NET]

Each net (models/<net>/<net>_deploy.prototxt) gets random but valid weights
(caffepy.testing.random_weights, logits scaled to std ~2), saved as a .caffemodel that OpenCV's ``readNetFromCaffe`` reads
(opencv-python-headless < 5: OpenCV 5 dropped the Caffe importer; benchmark-only, not a caffepy
dependency), and exported with caffepy.onnx for an onnxruntime CPU session (``intra_op_num_threads``
= the thread count, graph optimizations on, its default, its threads not spinning between
runs: see ``_ort_session``; the ``onnx`` extra; skipped when not installed) and for OpenVINO
(``_ov_request``: compiled for the CPU, f32, ``INFERENCE_NUM_THREADS`` = the thread count; the
``openvino`` extra; skipped when not installed). For every thread count the exact path is
timed first, then optimize mode, OpenCV, onnxruntime and OpenVINO round-robin on the same input
(one forward of each in turn, so that all see the same moments of a shared machine's load): median ms per forward over ``--iters`` after one warm-up.
(The exact path runs on its own: with 2 threads on a busy machine its forward takes several
times longer and its BLAS threads keep spinning into whichever runner follows it.) BLAS threads are set by threadpoolctl,
numba's by numba.set_num_threads, OpenCV's by cv2.setNumThreads. The largest relative difference
of the outputs from caffepy's exact path is printed too (optimize mode's: the largest of its first
pass and of one pass after the timed ones, with whichever thread setting it then chose). ``--profile NET`` prints the per-layer
forward times of NET (exact and optimize) at the first of ``--batches`` with the largest of
``--threads`` (each step on the whole batch: the batch split of optimize mode is not used);
with one thread it times CPU time (``time.process_time``), which other processes on a busy
machine disturb less than the wall clock.

Optimize mode picks, per forward, the (BLAS, numba) thread setting that has been fastest
(caffepy.infer.threads; the row prints the moving average of each setting it ran); its
first passes try each setting once, so optimize mode gets ``EXPLORE_PASSES`` extra warm-up
passes before the timed ones (every 8th timed pass still tries another setting, as in use).
``CAFFEPY_THREADS=fixed`` in the environment makes it always use the limits. Optimize mode runs
its default engine (``CAFFEPY_INFER_ENGINE`` picks one, caffepy.infer.engine; the row names it);
``--profile`` profiles caffepy's own steps.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from caffepy.math import kernels  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rates  # noqa: E402
from caffepy.net import Net  # noqa: E402
from caffepy.proto import caffe_pb2  # noqa: E402
from caffepy.testing.random_weights import calibrate, logit_blobs, randomize  # noqa: E402


EXPLORE_PASSES = 4      # optimize mode: the untimed first pass + one pass per thread setting


def _load(name):
    return os.path.join(ROOT, "models", name, "%s_deploy.prototxt" % name)


def _with_batch(path, batch, out):
    """A copy of the deploy prototxt whose input has batch ``batch``."""
    param = caffe_pb2.NetParameter()
    from google.protobuf import text_format
    with open(path) as f:
        text_format.Parse(f.read(), param)
    for layer in param.layer:
        if layer.type == "Input":
            layer.input_param.shape[0].dim[0] = batch
    if len(param.input_shape):
        param.input_shape[0].dim[0] = batch
    elif len(param.input_dim):
        param.input_dim[0] = batch
    with open(out, "w") as f:
        f.write(text_format.MessageToString(param))
    return out


def _interleaved_ms(fns, iters):
    """Median ms of each of ``fns``, run round-robin (one warm-up each), so that all of them
    see the same moments of a shared machine's load."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(iters):
        for fn, acc in zip(fns, times):
            t = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t)
    return [1e3 * float(np.median(t)) for t in times]


def _set_threads(n, cv2):
    from threadpoolctl import threadpool_limits
    limit = threadpool_limits(n, user_api="blas")
    kernels.set_threads(n)
    if cv2 is not None:
        cv2.setNumThreads(n)
    return limit


def _rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def _ort_session(net, n):
    """An onnxruntime CPU session of ``net`` exported by caffepy.onnx, ``n`` intra-op threads
    (one inter-op thread), or None without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    from caffepy import onnx as caffe_onnx
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = n, 1
    # its pool's threads spin after each run by default and would take the cores of the runner
    # timed after it (round-robin); the other runners' threads sleep between passes
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(caffe_onnx.to_model(net).SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _ov_request(net, n):
    """An OpenVINO CPU infer request of ``net`` exported by caffepy.onnx (f32, ``n`` threads),
    or None without openvino."""
    try:
        import openvino as ov
    except ImportError:
        return None
    import io
    from caffepy import onnx as caffe_onnx
    core = ov.Core()
    model = core.read_model(io.BytesIO(caffe_onnx.to_model(net).SerializeToString()))
    return core.compile_model(model, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
        "INFERENCE_NUM_THREADS": n}).create_infer_request()


def deploy_with_weights(name, batch, tmp):
    """(prototxt path, built exact Net, .caffemodel path) of models/<name> at ``batch``, with
    random weights whose logits have std ~2 (an unsaturated softmax), files under ``tmp``."""
    proto = _with_batch(_load(name), batch, os.path.join(tmp, "%s_%d.prototxt" % (name, batch)))
    exact = Net(proto, caffe_pb2.TEST)
    randomize(exact)
    calibrate(exact, logit_blobs(exact))
    weights = os.path.join(tmp, "%s_%d.caffemodel" % (name, batch))
    exact.save(weights)
    return proto, exact, weights


def bench(name, batch, threads, iters, tmp, cv2, peak=None):
    proto, exact, weights = deploy_with_weights(name, batch, tmp)
    gflop = rates.forward_gflop(proto)
    inp = exact.inputs[0]
    x = np.random.default_rng(1).standard_normal(exact.blobs[inp].shape).astype(np.float32)
    out = exact.outputs[0]
    ref = exact.forward(**{inp: x})[out].copy()
    err_opt = 0.0
    dnn = None
    if cv2 is not None:
        dnn = cv2.dnn.readNetFromCaffe(proto, weights)
        dnn.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        dnn.setInput(x)
        err_cv = _rel(dnn.forward().reshape(ref.shape), ref)
    def run_cv():
        dnn.setInput(x)
        dnn.forward()
    rows = []
    err_ort = err_ov = None
    for n in threads:
        sess = _ort_session(exact, n)
        if sess is not None:
            err_ort = max(err_ort or 0.0, _rel(sess.run(None, {inp: x})[0].reshape(ref.shape), ref))
        req = _ov_request(exact, n)
        if req is not None:
            got = list(req.infer({0: x}).values())[0]
            err_ov = max(err_ov or 0.0, _rel(np.asarray(got).reshape(ref.shape), ref))
        limit = _set_threads(n, cv2)
        # built under this thread count (its first passes are the thread choice's)
        fast = Net(proto, caffe_pb2.TEST, weights=weights, optimize=True)
        err_opt = max(err_opt, _rel(fast.forward(**{inp: x})[out], ref))
        t_exact = _interleaved_ms([lambda: exact.forward(**{inp: x})], iters)[0]
        for _ in range(EXPLORE_PASSES):     # the thread choice's first passes (see above)
            fast.forward(**{inp: x})
        times = _interleaved_ms([lambda: fast.forward(**{inp: x})]
                                + ([run_cv] if dnn is not None else [])
                                + ([lambda: sess.run(None, {inp: x})] if sess is not None else [])
                                + ([lambda: req.infer({0: x})] if req is not None else []),
                                iters)
        t_fast = times[0]
        t_cv = times[1] if dnn is not None else float("nan")
        t_ov = times[-1] if req is not None else float("nan")
        t_ort = times[-1 - (req is not None)] if sess is not None else float("nan")
        err_opt = max(err_opt, _rel(fast.forward(**{inp: x})[out], ref))  # as last chosen
        limit.restore_original_limits()
        rows.append((name, batch, n, t_exact, t_fast, t_cv, t_ort, t_ov))
        choice = getattr(fast._plan, "threads", None)      # caffepy's engine only
        print("%-14s b%-2d %dT  exact %8.1f  optimize %8.1f  opencv %8.1f  onnxruntime %8.1f  "
              "openvino %8.1f  opt/cv %5.2f  opt/ort %5.2f  opt/ov %5.2f  load %s  (optimize "
              "engine %s%s)" % (
                  name, batch, n, t_exact, t_fast, t_cv, t_ort, t_ov, t_fast / t_cv,
                  t_fast / t_ort, t_fast / t_ov,
                  " ".join(open("/proc/loadavg").read().split()[:3]), fast._plan.engine,
                  "" if choice is None else ", threads %s: %s" % (choice.mode, " ".join(
                      "blas %d numba %d parts %d: %.1f ms" % (k + (1e3 * v,))
                      for k, v in sorted(choice.avg.items())) or "limit")), flush=True)
        if peak is not None:
            top = rates.peak_for(peak, n)
            print("%-14s b%-2d %dT  %.2f GFLOP; GFLOP/s (share of peak): exact %s  optimize %s  "
                  "opencv %s  onnxruntime %s  openvino %s" % (
                      name, batch, n, gflop, *(rates.cell(gflop, t, top) for t in
                                               (t_exact, t_fast, t_cv, t_ort, t_ov))),
                  flush=True)
    print("%-14s b%-2d    max rel diff vs exact: optimize %.1e  opencv %s  onnxruntime %s  "
          "openvino %s" % (name, batch, err_opt, "%.1e" % err_cv if dnn is not None else "-",
                           "%.1e" % err_ort if err_ort is not None else "-",
                           "%.1e" % err_ov if err_ov is not None else "-"), flush=True)
    return rows


def profile(name, iters, tmp, batch=1, clock=time.perf_counter):
    proto = _with_batch(_load(name), batch, os.path.join(tmp, "%s_p.prototxt" % name))
    exact = Net(proto, caffe_pb2.TEST)
    randomize(exact)
    weights = os.path.join(tmp, "%s_p.caffemodel" % name)
    exact.save(weights)
    fast = Net(proto, caffe_pb2.TEST, weights=weights, optimize="caffepy")   # its steps by layer
    exact_steps = [(n, l, (lambda l=l, b=b, t=t: l.forward(b, t)))
                   for n, l, b, t in zip(exact._layer_names, exact.layers, exact.bottom_vecs,
                                         exact.top_vecs)]
    for label, steps in (("exact", exact_steps),
                         ("optimize", [(s.name, s.layer, s.run) for s in fast._plan.steps])):
        total = {}
        for _, _, run in steps:              # warm-up, untimed (first-call costs)
            run()
        for _ in range(iters):
            for lname, layer, run in steps:
                s = clock()
                run()
                total[lname] = total.get(lname, 0.0) + clock() - s
        by_type = {}
        for lname, layer, _ in steps:
            by_type[layer.type] = by_type.get(layer.type, 0.0) + total[lname]
        whole = sum(by_type.values())
        print("%s %s b%d per layer type (ms per forward, share):" % (name, label, batch))
        for typ, sec in sorted(by_type.items(), key=lambda kv: -kv[1]):
            print("    %-22s %8.2f  %5.1f%%" % (typ, 1e3 * sec / iters, 100 * sec / whole))
        top = sorted(total.items(), key=lambda kv: -kv[1])[:8]
        print("  slowest layers: " + ", ".join("%s %.1f" % (k, 1e3 * v / iters)
                                              for k, v in top))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="googlenet,resnet50,mobilenet_v1,squeezenet1_1")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--profile", default="", help="per-layer profile of this net")
    ap.add_argument("--peak-json", default=None, metavar="FILE",
                    help="bench_peak.py --json output (default: time the FMA loop now)")
    args = ap.parse_args(argv)
    try:
        import cv2
        if not hasattr(cv2.dnn, "readNetFromCaffe"):
            print("OpenCV %s has no Caffe importer (use opencv-python-headless<5): skipped"
                  % cv2.__version__)
            cv2 = None
    except ImportError:
        cv2 = None
    print("numpy %s, numba kernels %s, OpenCV %s, %d CPUs" % (
        np.__version__, "on" if kernels.available() else "off",
        cv2.__version__ if cv2 is not None else "not installed", os.cpu_count()))
    threads = [int(t) for t in args.threads.split(",")]
    peak = None if args.profile else rates.load_peak(args.peak_json)
    if peak is not None:
        print(rates.describe(peak))
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile:
            _set_threads(max(threads), cv2)
            profile(args.profile, args.iters, tmp, int(args.batches.split(",")[0]),
                    time.process_time if max(threads) == 1 else time.perf_counter)
            return
        for name in args.nets.split(","):
            for batch in [int(b) for b in args.batches.split(",")]:
                bench(name, batch, threads, args.iters, tmp, cv2, peak)


if __name__ == "__main__":
    main()
