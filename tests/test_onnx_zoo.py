"""ONNX coverage sweep over ../shared/modelzoo: every deploy net caffepy runs, exported and
checked against onnxruntime (<= 1e-4 relative on every output and on the blob feeding each
output Softmax, whose saturation would hide differences under random weights).

A deploy net: a net file whose layer types (CATALOG.json) include no data layer and no loss or
accuracy layer. Each is prepared as in test_modelzoo (batch 1, constant fillers then cheap random
weights, inputs shrunk to <= ONNX_SIDE pixels when larger; the declared size when the shrunk one
does not build). Outcomes: ``ok``, ``refused: <the one-line reason>``, ``mismatch``,
``caffepy`` (caffepy itself does not run it: left out of the figures), ``skipped`` (forward over
the GFLOP cap or the CPU budget, or its worker killed: left out too, and listed). Faster R-CNN
nets keep 8 proposals (test_modelzoo's ``_sweep_cfg``). Tasks run through tests/zoo_runner.py.
``python3 -m tests.test_onnx_zoo`` prints the report behind docs/onnx_coverage.md. In the suite
the CI sweep (nets up to ``CI_GFLOPS``) is a background chain (tests/background.py): one worker
beside the other tests, from the moment the session is collected; the test reads its JSON in its
turn.
"""
import collections
import importlib.util
import json
import os
import sys
import time

import numpy as np
import pytest

from tests import background
from tests.test_modelzoo import BVLC_TYPES, _stages, _sweep_cfg
from tests.zoo_prepare import prepare, shrunk
from tests.zoo_runner import cpu_limit, distinct_tasks, run_tasks, sweep_chain

ONNX_SIDE = 128
CPU_LIMIT = 60
CI_GFLOPS = 1.0     # the CI sweep skips nets whose forward (as prepared) needs more
DATA_TYPES = frozenset(["Data", "ImageData", "HDF5Data", "WindowData", "MemoryData",
                        "AnnotatedData", "VideoData", "ImageSegData", "ImageLabelmapData",
                        "DenseImageData", "DummyData"])


def deploy_files(root):
    with open(os.path.join(root, "CATALOG.json")) as f:
        catalog = json.load(f)
    return [(e["path"], frozenset(e["types"])) for e in catalog if e["kind"] == "net" and not any(
        "Loss" in t or "Accuracy" in t or t in DATA_TYPES for t in e["types"])]


def softmax_inputs(net):
    """Bottoms of the Softmax layers that produce net outputs."""
    outs = set(net.outputs)
    return [lp.bottom[0] for lp in net.net_param.layer
            if lp.type == "Softmax" and lp.top[0] in outs and lp.bottom[0] != lp.top[0]]


def net_gflops(net):
    from caffepy.zoo.summary import layer_flops
    return sum(layer_flops(layer, b, t) for layer, b, t in
               zip(net.layers, net.bottom_vecs, net.top_vecs)) / 1e9


def export_and_check(net_param, seed=0, max_gflops=None):
    """('ok' | 'refused' | 'mismatch' | 'skipped', detail); raises what caffepy raises building
    the net."""
    import caffepy
    from caffepy import onnx as caffe_onnx
    from caffepy import zoo
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    caffepy.set_random_seed(seed)
    net = Net(net_param, caffe_pb2.TEST, stages=_stages(net_param, caffe_pb2.TEST))
    from caffepy.onnx.export import build_graph
    try:
        build_graph(net, extra_outputs=softmax_inputs(net))     # refusals, before any cost
    except caffe_onnx.ExportError as e:
        return "refused", str(e)
    gflops = net_gflops(net)
    if max_gflops and gflops > max_gflops:
        return "skipped", "%.1f GFLOP forward (over %.1f)" % (gflops, max_gflops)
    zoo.randomize_params(net, seed)
    model = caffe_onnx.to_model(net, extra_outputs=softmax_inputs(net))
    errors = caffe_onnx.compare(net, model, seed)
    worst = max(errors, key=errors.get)
    if errors[worst] <= 1e-4:
        return "ok", "%.1e (%.2f GFLOP)" % (errors[worst], gflops)
    return "mismatch", "%s: %.3g" % (worst, errors[worst])


def prepared(path):
    """The NetParameters to try for one file: shrunk, batch 1, declared batch (test_modelzoo)."""
    param, declared = prepare(path)
    return [p for p in (shrunk(param, ONNX_SIDE), param, declared) if p is not None]


def run_file(attempts, limit=CPU_LIMIT, max_gflops=None):
    """(outcome, detail) for one net file's prepared ``attempts`` (see module doc)."""
    with cpu_limit(limit):
        reason = None
        for p in attempts:
            try:
                return export_and_check(p, max_gflops=max_gflops)
            except TimeoutError:
                return "skipped", "over the %d CPU-second budget" % limit
            except Exception as e:
                reason = "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:200])
        return "caffepy", reason


def _work(task):
    from caffepy.proto import caffe_pb2
    path, blobs, limit, max_gflops = task
    t0 = time.time()
    if isinstance(blobs, str):
        return path, "caffepy", blobs, 0.0
    attempts = []
    for b in blobs:
        attempts.append(caffe_pb2.NetParameter())
        attempts[-1].ParseFromString(b)
    with _sweep_cfg():
        outcome, detail = run_file(attempts, limit, max_gflops)
    return path, outcome, detail, time.time() - t0


def _tasks(paths, limit, max_gflops):
    """One task per distinct prepared net (a file caffepy cannot read is caffepy's failure)."""
    return distinct_tasks(paths, prepared, lambda e: " ".join(str(e).split())[:200], limit,
                          max_gflops)


def sweep(root, only=None, jobs=2, limit=CPU_LIMIT, progress=None, max_gflops=None):
    files = [(p, t) for p, t in deploy_files(root)
             if not only or (only in p if isinstance(only, str) else p in only)]
    tasks, same_as = _tasks([os.path.join(root, p) for p, _ in files], limit, max_gflops)
    done = run_tasks(_work, tasks, jobs, lambda out: _progress(progress, out), _died)
    out = []
    for p, types in files:
        full = os.path.join(root, p)
        out.append((p, types) + done[same_as.get(full, full)][1:])
    return out


def _died(task):
    return task[0], "skipped", "worker process died (killed: out of memory?)", 0.0


def _progress(stream, out):
    if stream:
        stream.write("%5.1fs %-9s %s  %s\n" % (out[3], out[1], out[0], out[2] or ""))
        stream.flush()


def summarize(results, out=sys.stdout):
    """Print the refusals / mismatches grouped, and the two figures; returns them."""
    ran = [r for r in results if r[2] not in ("caffepy", "skipped")]
    bvlc = [r for r in ran if r[1] <= BVLC_TYPES]
    groups = collections.Counter()
    for p, types, outcome, detail, _ in results:
        if outcome != "ok":
            out.write("%-8s %s: %s\n" % (outcome, p, detail))
            key = detail.split("): ", 1)[-1] if outcome == "refused" else detail
            groups["%s: %s" % (outcome, key[:110])] += 1
    for reason, n in groups.most_common():
        out.write("%4d x %s\n" % (n, reason))
    ok_all = sum(r[2] == "ok" for r in ran)
    ok_bvlc = sum(r[2] == "ok" for r in bvlc)
    frac_all, frac_bvlc = ok_all / max(len(ran), 1.0), ok_bvlc / max(len(bvlc), 1.0)
    out.write("onnx: %d/%d deploy nets that caffepy runs export and match (%.1f%%); BVLC-only: "
              "%d/%d (%.1f%%); of %d deploy files caffepy does not run %d, skipped %d\n"
              % (ok_all, len(ran), 100 * frac_all, ok_bvlc, len(bvlc), 100 * frac_bvlc,
                 len(results), sum(r[2] == "caffepy" for r in results),
                 sum(r[2] == "skipped" for r in results)))
    return frac_all, frac_bvlc


ONNX_KEY = "test_onnx_zoo.py::test_onnx_zoo_sweep"


@background.job(ONNX_KEY)
def sweep_job(work):
    """The CI sweep as a background chain (tests/background.py): one worker, results as JSON."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None                     # the test skips
    return sweep_chain(work, "tests.test_onnx_zoo", ["--gflops", str(CI_GFLOPS)], "onnx")


@pytest.mark.slow
def test_onnx_zoo_sweep(capsys, tmp_path):
    pytest.importorskip("onnxruntime")
    from tests.conftest import shared_path
    root = shared_path("modelzoo")
    _, rows = background.chain_json(ONNX_KEY, tmp_path, 3600, "onnx.log", "onnx.json")
    types = dict(deploy_files(root))
    assert sorted(r["path"] for r in rows) == sorted(types)
    results = [(r["path"], types[r["path"]], r["outcome"], r["detail"], r["wall_s"])
               for r in rows]
    with capsys.disabled():
        sys.stdout.write("\n")
        frac_all, frac_bvlc = summarize(results)
    assert not [r for r in results if r[2] == "mismatch"]
    assert frac_bvlc >= 0.95


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="caffepy ONNX export sweep over the model zoo")
    ap.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("-t", "--limit", type=int, default=CPU_LIMIT)
    ap.add_argument("--gflops", type=float, default=None, help="skip nets over this forward cost")
    ap.add_argument("--json")
    ap.add_argument("only", nargs="?")
    a = ap.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.time()
    res = sweep(os.environ.get("CAFFEPY_ZOO", os.path.join(here, "..", "shared", "modelzoo")),
                a.only, a.jobs, a.limit, progress=sys.stdout, max_gflops=a.gflops)
    summarize(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(path=p, bvlc_only=t <= BVLC_TYPES, outcome=o, detail=d,
                            wall_s=round(w, 2)) for p, t, o, d, w in res], f, indent=1)
    sys.stdout.write("wall %.0f s\n" % (time.time() - t0))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
