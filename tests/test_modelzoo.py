"""Zoo sweep: every net file in ../shared/modelzoo builds and runs forward at batch 1.

Data layers are swapped for Input layers (caffepy.zoo.replace_data_layers), inputs come from
caffepy.zoo.input_values, and weights are cheap random values: the fillers are made constant
(caffepy.zoo.constant_fillers) and the built net gets caffepy.zoo.randomize_params. Each phase a
file declares (TRAIN / TEST in include or exclude rules; TEST alone when none) must build and run
forward; a file that names no phase (a deploy net) is also built (set up, no forward) in TRAIN,
at batch 1 and at the size its TEST run used (a file whose rules name only TEST is a test net:
Caffe cannot build it in TRAIN either). A Python layer whose module cannot be imported is
a failure with that reason (py-faster-rcnn's RPN layers are built in: caffepy.forks.detection.frcnn). A
file whose Python *data* layer (no bottoms) is neither importable nor built in is not run at all:
its shapes would be guesses, so it is reported in its own category and left out of the figures. Files whose prepared nets are
identical (same NetParameter once prepared) run once and share the result. Work is spread over
processes that each use one BLAS thread; a file gets at most ``limit`` CPU seconds; a file whose
worker is killed (out of memory) fails with that reason (tests/zoo_runner.py). In the suite the
sweep is a background chain (tests/background.py): one worker beside the other tests, from the
moment the session is collected; the test reads its JSON in its turn.

    python -m tests.test_modelzoo [-j JOBS] [-t CPU_SECONDS] [--times N] [PATH_SUBSTRING]
"""
import collections
import json
import os
import sys
import time

import numpy as np
import pytest

from tests import background
from tests.zoo_prepare import is_python_data, prepare, shrunk
from tests.zoo_runner import cpu_limit, distinct_tasks, run_tasks, sweep_chain

BVLC_TYPES = frozenset("""
AbsVal Accuracy ArgMax BNLL BatchNorm BatchReindex Bias Clip Concat ContrastiveLoss Convolution
Crop Data Deconvolution Dropout DummyData ELU Eltwise Embed EuclideanLoss Exp Filter Flatten
HDF5Data HDF5Output HingeLoss Im2col ImageData InfogainLoss InnerProduct Input LRN LSTM LSTMUnit
Log MVN MemoryData MultinomialLogisticLoss PReLU Parameter Pooling Power Python RNN ReLU Reduction
Reshape SPP Scale Sigmoid SigmoidCrossEntropyLoss Silence Slice Softmax SoftmaxWithLoss Split
Swish TanH Threshold Tile WindowData
""".split())
CPU_LIMIT = 240          # CPU seconds per net file; the slowest file needs ~10 on an idle core


def _phases(net_param):
    from caffepy.proto import caffe_pb2
    found = set()
    for lp in net_param.layer:
        for rule in list(lp.include) + list(lp.exclude):
            if rule.HasField("phase"):
                found.add(rule.phase)
    return sorted(found) if found else [caffe_pb2.TEST]


def _declares_phases(net_param):
    """Whether any include / exclude rule names a phase (a file without one is a deploy net)."""
    return any(rule.HasField("phase") for lp in net_param.layer
               for rule in list(lp.include) + list(lp.exclude))


def _stages(net_param, phase):
    """The first stage named by an include rule of ``phase`` (as a solver's test_state would)."""
    for lp in net_param.layer:
        for rule in lp.include:
            if rule.phase == phase and len(rule.stage):
                return [rule.stage[0]]
    return []


def _run_phase(param, phase, seed, build_only=False):
    import caffepy
    from caffepy import zoo
    from caffepy.net import Net
    caffepy.set_random_seed(seed)
    net = Net(param, phase, stages=_stages(param, phase))
    if build_only:
        return
    zoo.randomize_params(net, seed)
    rng = np.random.default_rng(seed)
    shapes = [net.blobs[n].data.shape for n in net.inputs]
    hw = next((s[2:] for s in shapes if len(s) == 4), None)
    for name in net.inputs:
        blob = net.blobs[name]
        blob.data[...] = zoo.input_values(name, blob.data.shape, rng, hw)
    zoo.forward_releasing(net)


def _reason(e):
    msg = " ".join(str(e).split()) or type(e).__name__
    return "%s: %s" % (type(e).__name__, msg[:300])


def run_prepared(param, declared, seed=0, shrink=True):
    """Build and run every declared phase at batch 1 (or, when the net hard-codes its batch in a
    Reshape, at its declared batch); None on success, else a one-line reason. With ``shrink``,
    large inputs are tried first at a smaller size (``shrunk``); the declared size decides."""
    full = [param] + ([declared] if any(lp.type == "Reshape" for lp in param.layer) else [])
    attempts = []                   # (net, shrunk?): each full-size net after its shrunk copy
    for net_param in full:
        copy = shrunk(net_param) if shrink else None
        attempts += ([(copy, True)] if copy is not None else []) + [(net_param, False)]
    from caffepy.proto import caffe_pb2
    reason, ran = None, param
    for phase in _phases(param):
        for net_param, is_small in attempts:
            try:
                _run_phase(net_param, phase, seed)
                ran = net_param
                break
            except TimeoutError:
                raise
            except Exception as e:  # the sweep reports every failure, whatever its kind
                if not is_small:
                    reason = _reason(e)
        else:
            return reason
    if not _declares_phases(param):
        try:                         # TRAIN: built at the size the TEST phase ran at
            _run_phase(ran, caffe_pb2.TRAIN, seed, build_only=True)
        except TimeoutError:
            raise
        except Exception as e:
            return "TRAIN phase: " + _reason(e)
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


SWEEP_CFG = {"TEST": {"RPN_POST_NMS_TOP_N": 8}, "TRAIN": {"RPN_POST_NMS_TOP_N": 8, "BATCH_SIZE": 8}}


class _sweep_cfg(object):
    """py-faster-rcnn's layers keep at most 8 proposals and sample 8 RoIs: the detection head's
    "batch 1" (its cost grows with the RoI count: 300 at test time by default)."""

    def __enter__(self):
        from caffepy.forks.detection.frcnn.config import cfg
        self.saved = {k: dict(cfg[k]) for k in SWEEP_CFG}
        for k, values in SWEEP_CFG.items():
            cfg[k].update(values)

    def __exit__(self, *exc):
        from caffepy.forks.detection.frcnn.config import cfg
        for k, values in self.saved.items():
            cfg[k].update(values)


def _work(task):
    """Worker: (path, serialized prepared nets or a reason) -> (path, reason, cpu s, wall s,
    the worker's peak memory in MiB so far)."""
    import resource
    from caffepy.proto import caffe_pb2
    path, blobs, limit, shrink = task
    if isinstance(blobs, str):
        return path, blobs, 0.0, 0.0, 0
    t0, c0 = time.time(), time.process_time()
    param, declared = caffe_pb2.NetParameter(), caffe_pb2.NetParameter()
    param.ParseFromString(blobs[0])
    declared.ParseFromString(blobs[1])
    try:
        with cpu_limit(limit), _sweep_cfg():
            reason = run_prepared(param, declared, shrink=shrink)
    except TimeoutError:
        reason = "TimeoutError: over the %d CPU-second limit" % limit
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return path, reason, time.process_time() - c0, time.time() - t0, peak


def _tasks(paths, limit, shrink):
    return distinct_tasks(paths, prepare, _reason, limit, shrink)


def sweep(root, only=None, jobs=1, limit=CPU_LIMIT, progress=None, shrink=True):
    """[(catalog path, layer types, failure reason or None, cpu seconds)] for every net file."""
    files = [(p, t) for p, t in zoo_net_files(root) if not only or only in p]
    tasks, same_as = _tasks([os.path.join(root, p) for p, _ in files], limit, shrink)
    tasks.sort(key=lambda t: -len(t[1][0]) if isinstance(t[1], tuple) else 0)  # big nets first
    done = run_tasks(_work, tasks, jobs, lambda out: _progress(progress, out), _died)
    results = []
    for p, types in files:
        full = os.path.join(root, p)
        reason, cpu = done[same_as.get(full, full)][1:3]
        results.append((p, types, reason, cpu if full not in same_as else 0.0))
    return results


def _died(task):
    return task[0], "worker process died (killed: out of memory?)", 0.0, 0.0, 0


def _progress(stream, out):
    if stream:
        stream.write("%6.1fs cpu %6.1fs wall %5d MiB %s %s\n" % (
            out[2], out[3], out[4], "ok  " if out[1] is None else "FAIL", out[0]))
        stream.flush()


def summarize(results, out=sys.stdout):
    """Print every failure with its reason, failures grouped by reason, and the two figures."""
    pydata = [r for r in results if is_python_data(r[2])]
    for p, _, reason, _ in pydata:
        out.write("PYTHON-DATA %s: %s\n" % (p, reason.split(": ", 1)[-1]))
    results = [r for r in results if not is_python_data(r[2])]
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
    out.write("zoo: %d/%d net files pass (%.1f%%); BVLC-only: %d/%d (%.1f%%); not run, Python "
              "data layer not available: %d\n" % (ok_all, len(results), 100 * frac_all, ok_bvlc,
                                                   len(bvlc), 100 * frac_bvlc, len(pydata)))
    return frac_all, frac_bvlc


SWEEP_KEY = "test_modelzoo.py::test_modelzoo_sweep"


@background.job(SWEEP_KEY)
def sweep_job(work):
    """The sweep as a background chain (tests/background.py): one worker, results as JSON."""
    return sweep_chain(work, "tests.test_modelzoo", [], "sweep")


@pytest.mark.slow
def test_modelzoo_sweep(capsys, tmp_path):
    from tests.conftest import shared_path
    root = shared_path("modelzoo")
    _, rows = background.chain_json(SWEEP_KEY, tmp_path, 3600, "sweep.log", "sweep.json")
    types = dict(zoo_net_files(root))
    assert sorted(r["path"] for r in rows) == sorted(types)
    results = [(r["path"], types[r["path"]], r["reason"], r["cpu_s"]) for r in rows]
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
