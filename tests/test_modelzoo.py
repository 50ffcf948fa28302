"""Zoo sweep: every net file in ../shared/modelzoo builds and runs forward at batch 1.

Data layers are swapped for Input layers (caffepy.zoo.replace_data_layers), weights come from the
fillers, inputs from caffepy.zoo.input_values. Each phase a file declares (TRAIN / TEST in include
or exclude rules; TEST alone when none) must build and run. A Python layer whose module cannot be
imported is a failure with that reason. Run directly for the report:

    python -m tests.test_modelzoo [-j JOBS] [PATH_SUBSTRING]
"""
import json
import os
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


def _run_phase(param, phase, seed):
    import caffepy
    from caffepy import zoo
    from caffepy.net import Net
    caffepy.set_random_seed(seed)
    net = Net(param, phase, stages=_stages(param, phase))
    rng = np.random.default_rng(seed)
    shapes = [net.blobs[n].data.shape for n in net.inputs]
    hw = next((s[2:] for s in shapes if len(s) == 4), None)
    for name in net.inputs:
        blob = net.blobs[name]
        blob.data[...] = zoo.input_values(name, blob.data.shape, rng, hw)
    net.forward()


def run_net_file(path, seed=0):
    """Build and run every declared phase at batch 1 (or, when the net hard-codes its batch in a
    Reshape, at its declared batch); returns None on success, else a one-line reason."""
    from caffepy import zoo
    from caffepy.proto import io as proto_io
    try:
        declared = zoo.replace_data_layers(proto_io.read_net(path))
        param = zoo.replace_data_layers(proto_io.read_net(path), batch_size=1)
        _batch_one(param)
        for phase in _phases(param):
            try:
                _run_phase(param, phase, seed)
            except Exception:
                if not any(lp.type == "Reshape" for lp in param.layer):
                    raise
                _run_phase(declared, phase, seed)
    except Exception as e:  # the sweep reports every failure, whatever its kind
        msg = " ".join(str(e).split()) or type(e).__name__
        return "%s: %s" % (type(e).__name__, msg[:300])
    return None


def zoo_net_files(root):
    with open(os.path.join(root, "CATALOG.json")) as f:
        catalog = json.load(f)
    return [(e["path"], set(e["types"])) for e in catalog if e["kind"] == "net"]


def _run_timed(path, limit=None):
    import signal

    def alarm(signum, frame):
        raise TimeoutError("no result within %d s" % limit)
    if limit:
        signal.signal(signal.SIGALRM, alarm)
        signal.alarm(limit)
    t0 = time.time()
    try:
        reason = run_net_file(path)
    except TimeoutError as e:
        reason = "TimeoutError: %s" % e
    finally:
        if limit:
            signal.alarm(0)
    return path, reason, time.time() - t0


def sweep(root, only=None, jobs=1, limit=None, progress=None):
    """[(catalog path, layer types, failure reason or None)] for every net file."""
    files = [(p, t) for p, t in zoo_net_files(root) if not only or only in p]
    paths = [os.path.join(root, p) for p, _ in files]
    work = [(p, limit) for p in paths]
    reasons = {}
    if jobs > 1:
        import multiprocessing
        with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=8) as pool:
            for path, reason, dt in pool.imap_unordered(_star, work, chunksize=1):
                reasons[path] = reason
                if progress:
                    progress.write("%6.1fs %s %s\n" % (dt, "ok  " if reason is None else "FAIL", path))
    else:
        for w in work:
            path, reason, dt = _star(w)
            reasons[path] = reason
    return [(p, t, reasons[full]) for (p, t), full in zip(files, paths)]


def _star(args):
    return _run_timed(*args)


def summarize(results, out=sys.stdout):
    bvlc = [r for r in results if r[1] <= BVLC_TYPES]
    ok_all = sum(r[2] is None for r in results)
    ok_bvlc = sum(r[2] is None for r in bvlc)
    for p, _, reason in results:
        if reason:
            out.write("FAIL %s: %s\n" % (p, reason))
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
        frac_all, frac_bvlc = summarize(results)
    assert frac_bvlc >= 0.98
    assert frac_all >= 0.80


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("-t", "--limit", type=int, default=None, help="seconds per net file")
    ap.add_argument("only", nargs="?")
    a = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.time()
    res = sweep(os.environ.get("CAFFEPY_ZOO", os.path.join(here, "..", "shared", "modelzoo")),
                a.only, a.jobs, a.limit, progress=sys.stdout)
    summarize(res)
    sys.stdout.write("%.0f s\n" % (time.time() - t0))
