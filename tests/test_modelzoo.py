"""Zoo sweep: every net file in ../shared/modelzoo builds and runs forward at batch 1.

Data layers are swapped for Input layers (caffepy.zoo.replace_data_layers), inputs come from
caffepy.zoo.input_values, and weights are cheap random values: the fillers are made constant
(caffepy.zoo.constant_fillers) and the built net gets caffepy.zoo.randomize_params. Each phase a
file declares (TRAIN / TEST in include or exclude rules; TEST alone when none) must build and run
forward. A Python layer whose module cannot be imported is a failure with that reason
(py-faster-rcnn's RPN layers are built in: caffepy.contrib.frcnn). Files whose prepared nets are
identical (same NetParameter once prepared) run once and share the result. Work is spread over
processes that each use one BLAS thread; a file gets at most ``limit`` CPU seconds.

    python -m tests.test_modelzoo [-j JOBS] [-t CPU_SECONDS] [--times N] [PATH_SUBSTRING]
"""
import collections
import hashlib
import json
import os
import signal
import sys
import time

import numpy as np
import pytest

BVLC_TYPES = frozenset("""
AbsVal Accuracy ArgMax BNLL BatchNorm BatchReindex Bias Clip Concat ContrastiveLoss Convolution
Crop Data Deconvolution Dropout DummyData ELU Eltwise Embed EuclideanLoss Exp Filter Flatten
HDF5Data HDF5Output HingeLoss Im2col ImageData InfogainLoss InnerProduct Input LRN LSTM LSTMUnit
Log MVN MemoryData MultinomialLogisticLoss PReLU Parameter Pooling Power Python RNN ReLU Reduction
Reshape SPP Scale Sigmoid SigmoidCrossEntropyLoss Silence Slice Softmax SoftmaxWithLoss Split
Swish TanH Threshold Tile WindowData
""".split())
_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CPU_LIMIT = 240          # CPU seconds per net file; the slowest file needs ~10 on an idle core


def _phases(net_param):
    from caffepy.proto import caffe_pb2
    found = set()
    for lp in net_param.layer:
        for rule in list(lp.include) + list(lp.exclude):
            if rule.HasField("phase"):
                found.add(rule.phase)
    return sorted(found) if found else [caffe_pb2.TEST]


def _batch_one(net_param):
    for lp in net_param.layer:
        if lp.type == "Input":
            for shape in lp.input_param.shape:
                if len(shape.dim) and shape.dim[0] > 1:
                    shape.dim[0] = 1


def _stages(net_param, phase):
    """The first stage named by an include rule of ``phase`` (as a solver's test_state would)."""
    for lp in net_param.layer:
        for rule in lp.include:
            if rule.phase == phase and len(rule.stage):
                return [rule.stage[0]]
    return []


def prepare(path):
    """(batch-1 net, declared-batch net) NetParameters, data layers replaced, fillers constant."""
    from caffepy import zoo
    from caffepy.proto import io as proto_io
    raw = proto_io.read_net(path)
    declared = zoo.constant_fillers(zoo.replace_data_layers(raw))
    param = zoo.constant_fillers(zoo.replace_data_layers(raw, batch_size=1))
    _batch_one(param)
    return param, declared


def _run_phase(param, phase, seed):
    import caffepy
    from caffepy import zoo
    from caffepy.net import Net
    caffepy.set_random_seed(seed)
    net = Net(param, phase, stages=_stages(param, phase))
    zoo.randomize_params(net, seed)
    rng = np.random.default_rng(seed)
    shapes = [net.blobs[n].data.shape for n in net.inputs]
    hw = next((s[2:] for s in shapes if len(s) == 4), None)
    for name in net.inputs:
        blob = net.blobs[name]
        blob.data[...] = zoo.input_values(name, blob.data.shape, rng, hw)
    net.forward()


def _reason(e):
    msg = " ".join(str(e).split()) or type(e).__name__
    return "%s: %s" % (type(e).__name__, msg[:300])


def run_prepared(param, declared, seed=0):
    """Build and run every declared phase at batch 1 (or, when the net hard-codes its batch in a
    Reshape, at its declared batch); None on success, else a one-line reason."""
    try:
        for phase in _phases(param):
            try:
                _run_phase(param, phase, seed)
            except Exception:
                if not any(lp.type == "Reshape" for lp in param.layer):
                    raise
                _run_phase(declared, phase, seed)
    except Exception as e:  # the sweep reports every failure, whatever its kind
        return _reason(e)
    return None


def run_net_file(path, seed=0):
    """``run_prepared`` for a net file; a file that cannot be read fails with that reason."""
    try:
        param, declared = prepare(path)
    except Exception as e:
        return _reason(e)
    return run_prepared(param, declared, seed)


def zoo_net_files(root):
    with open(os.path.join(root, "CATALOG.json")) as f:
        catalog = json.load(f)
    return [(e["path"], set(e["types"])) for e in catalog if e["kind"] == "net"]


def _on_cpu_limit(signum, frame):
    raise TimeoutError("over the CPU-time limit")


def _work(task):
    """Worker: (path, serialized prepared nets or a reason) -> (path, reason, cpu s, wall s)."""
    from caffepy.proto import caffe_pb2
    path, blobs, limit = task
    if isinstance(blobs, str):
        return path, blobs, 0.0, 0.0
    t0, c0 = time.time(), time.process_time()
    param, declared = caffe_pb2.NetParameter(), caffe_pb2.NetParameter()
    param.ParseFromString(blobs[0])
    declared.ParseFromString(blobs[1])
    if limit:
        signal.signal(signal.SIGPROF, _on_cpu_limit)
        signal.setitimer(signal.ITIMER_PROF, limit)
    try:
        reason = run_prepared(param, declared)
    except TimeoutError:
        reason = "TimeoutError: over the %d CPU-second limit" % limit
    finally:
        if limit:
            signal.setitimer(signal.ITIMER_PROF, 0)
    return path, reason, time.process_time() - c0, time.time() - t0


def _tasks(paths, limit):
    """One task per distinct prepared net; {path: path of the identical net that runs}."""
    tasks, first, same_as = [], {}, {}
    for path in paths:
        try:
            nets = prepare(path)
        except Exception as e:
            tasks.append((path, _reason(e), limit))
            continue
        blobs = tuple(n.SerializeToString(deterministic=True) for n in nets)
        digest = hashlib.sha1(b"".join(blobs)).hexdigest()
        if digest in first:
            same_as[path] = first[digest]
            continue
        first[digest] = path
        tasks.append((path, blobs, limit))
    return tasks, same_as


def sweep(root, only=None, jobs=1, limit=CPU_LIMIT, progress=None):
    """[(catalog path, layer types, failure reason or None, cpu seconds)] for every net file."""
    files = [(p, t) for p, t in zoo_net_files(root) if not only or only in p]
    tasks, same_as = _tasks([os.path.join(root, p) for p, _ in files], limit)
    tasks.sort(key=lambda t: -len(t[1][0]) if isinstance(t[1], tuple) else 0)  # big nets first
    done = {}
    if jobs > 1:
        import multiprocessing
        saved = {k: os.environ.get(k) for k in _ONE_THREAD}
        os.environ.update(_ONE_THREAD)       # read by numpy's BLAS as the spawned workers start
        try:
            with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=40) as pool:
                for out in pool.imap_unordered(_work, tasks, chunksize=1):
                    done[out[0]] = out
                    _progress(progress, out)
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    else:
        for task in tasks:
            done[task[0]] = out = _work(task)
            _progress(progress, out)
    results = []
    for p, types in files:
        full = os.path.join(root, p)
        _, reason, cpu, _ = done[same_as.get(full, full)]
        results.append((p, types, reason, cpu if full not in same_as else 0.0))
    return results


def _progress(stream, out):
    if stream:
        stream.write("%6.1fs cpu %6.1fs wall %s %s\n" % (out[2], out[3], "ok  " if out[1] is None
                                                          else "FAIL", out[0]))
        stream.flush()


def summarize(results, out=sys.stdout):
    """Print every failure with its reason, failures grouped by reason, and the two figures."""
    bvlc = [r for r in results if r[1] <= BVLC_TYPES]
    ok_all = sum(r[2] is None for r in results)
    ok_bvlc = sum(r[2] is None for r in bvlc)
    groups = collections.Counter()
    for p, types, reason, _ in results:
        if reason:
            out.write("FAIL %s%s: %s\n" % (p, " [BVLC-only]" if types <= BVLC_TYPES else "",
                                           reason))
            groups[reason.split(":")[0] + ": " + reason.split(":", 1)[-1][:90].strip()] += 1
    for reason, n in groups.most_common():
        out.write("%4d x %s\n" % (n, reason))
    frac_all = ok_all / float(max(len(results), 1))
    frac_bvlc = ok_bvlc / float(max(len(bvlc), 1))
    out.write("zoo: %d/%d net files pass (%.1f%%); BVLC-only: %d/%d (%.1f%%)\n"
              % (ok_all, len(results), 100 * frac_all, ok_bvlc, len(bvlc), 100 * frac_bvlc))
    return frac_all, frac_bvlc


@pytest.mark.slow
def test_modelzoo_sweep(capsys):
    from tests.conftest import shared_path
    root = shared_path("modelzoo")
    results = sweep(root, jobs=min(2, os.cpu_count() or 1))
    with capsys.disabled():
        sys.stdout.write("\n")
        frac_all, frac_bvlc = summarize(results)
    assert frac_bvlc >= 0.98
    assert frac_all >= 0.80


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="caffepy model-zoo sweep report")
    ap.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("-t", "--limit", type=int, default=CPU_LIMIT, help="CPU seconds per net file")
    ap.add_argument("--times", type=int, default=0, help="list the N slowest files")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("only", nargs="?")
    a = ap.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0, c0 = time.time(), time.process_time()
    res = sweep(os.environ.get("CAFFEPY_ZOO", os.path.join(here, "..", "shared", "modelzoo")),
                a.only, a.jobs, a.limit, progress=sys.stdout)
    summarize(res)
    for p, _, _, cpu in sorted(res, key=lambda r: -r[3])[:a.times]:
        sys.stdout.write("%7.1f s cpu  %s\n" % (cpu, p))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(path=p, bvlc_only=t <= BVLC_TYPES, reason=r, cpu_s=round(c, 2))
                       for p, t, r, c in res], f, indent=1)
    sys.stdout.write("workers' cpu %.0f s, parent cpu %.0f s, wall %.0f s\n"
                     % (sum(r[3] for r in res), time.process_time() - c0, time.time() - t0))


if __name__ == "__main__":
    main()
