#!/usr/bin/env python3
"""Measure every census file (manifest.tsv) with caffepy, one fresh forked process per run.

Tiers, each a run of caffepy's own command in a forked child with a 60 s limit (the machinery of
tools/zoo_survey.py: ``run_cli``, the TEST-then-TRAIN retry of ``attempt``, ``category``):

* ``lenient``: ``caffepy summary FILE`` builds (its default: fields caffepy does not know are
  dropped with a WARNING, a layer no other layer reads that cannot be built is shown as ``?``).
* ``read``: the structure is read: implied by ``lenient``; otherwise ``caffepy draw FILE -o x.dot``
  (the same lenient reading of the text, without building) succeeds.
* ``complete``: ``caffepy summary --strict FILE`` builds and no layer is shown as ``?``. The strict
  run differs from the lenient one only where the lenient run dropped fields (its WARNING says
  "--strict makes it an error"), read fields known only from forks that caffepy does not compute
  (its WARNING says "read for the structure only"; ``--strict`` refuses them, as training does),
  listed a layer it cannot build (its WARNING says "and no shape rule": its tops and the layers
  that read them shown as ``?``, or it has no tops),
  read text Caffe's parser refuses (a template placeholder, a repeated singular field, ``//``
  comments ...: its WARNING says "--strict refuses them" or "--strict too") or carried the shapes
  of a layer without a class (its table's footnote says "~ shape carried:"), so it is run only
  then (in the phase the lenient run used); else the lenient run's result stands for it.
* ``runnable`` (only files that declare their inputs, ``input:`` / ``input_shape`` / ``input_dim``
  or an Input layer, and have no data layer, as tools/zoo_survey.classify decides; and only when
  ``complete``): the net is built in the phase the lenient run showed (TEST, or TRAIN where the
  net's inputs are TRAIN's only: ``caffe time`` runs TRAIN by default) with cheap random weights
  (caffepy.zoo.constant_fillers + randomize_params), reshaped to a batch of 1 where its inputs
  declare more and the net takes it (as a pycaffe script classifying one image does; else at the
  declared batch), its inputs get caffepy.zoo.net_input_values and a
  forward pass runs (caffepy.zoo.forward_releasing, its batch-normalisation statistics calibrated
  on the way) and gives finite outputs.

A file whose repository's Python layer modules were collected (pymods.tsv, tools/census/pymods.py)
is measured with the roots of the modules it names, then the repository's top directory, then
the directories its ``_init_paths.py`` files add (``pymods.roots_for``), on
sys.path (in each forked child, right after this tree's root, so ``import caffe`` stays
caffepy's); its record says ``modules`` (how many directories), and a record of it without modules,
or with another number of them than the rule gives now, does not count as measured. That runs
third-party code, so measuring runs inside bubblewrap:
read-only root, private /tmp, no network, only the results file writable (``sandbox_argv``).
Without bwrap, a run that would measure such a file stops with a one-line error.

Each file is measured where its repository has it: the repository's cached files (kept, or
copies of files another repository kept) are linked at their paths in a scratch tree
(``census_lib.RepositoryTrees``), so the sizes its neighbours declare reach the input-size search.

Per file: the tiers, the category and one-line error of the first tier that failed (strict for
``complete``), the seconds, and, for the census split only, the layer types the file names (held-out
files keep no per-file detail beyond tiers and category). Records go one JSON object a line to
/work/census-data/results.json (outside the repository), keyed by sha256 and the git tree of
caffepy/ measured, so a rerun skips what that caffepy already measured (the run is resumable).
``--summary`` writes tools/census/results_summary.json: per split, the tier counts and the
complete share's 95% intervals, file- and repository-weighted, from a bootstrap over repositories
(``census_lib.share_interval``); per-category counts for the census split only.

    nice -n 10 python3 tools/census/measure.py            # measure what is not measured yet
    nice -n 10 python3 tools/census/measure.py --python-layers --split census --limit 10
    python3 tools/census/measure.py --shard 0/2 --results A.json &   # two workers; then append
    python3 tools/census/measure.py --shard 1/2 --results B.json     # A.json, B.json to results.json
    python3 tools/census/measure.py --sha 88487b4b --results /tmp/one.json   # chosen files
    python3 tools/census/measure.py --summary             # write results_summary.json
"""
import argparse
import collections
import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import census_lib as L  # noqa: E402
import forward as F  # noqa: E402
import pymods  # noqa: E402
import zoo_survey as Z  # noqa: E402

sys.path.insert(0, L.ROOT)        # this tree's caffepy, not another one installed

RESULTS = os.path.join(L.DATA, "results.json")
SUMMARY = os.path.join(HERE, "results_summary.json")
TIERS = ("read", "lenient", "complete", "runnable")
SANDBOX_ENV = "CENSUS_SANDBOX"


def sandbox_argv(results, argv):
    """The command that runs this script with ``argv`` inside bubblewrap: the whole file system
    read-only, a private /tmp, fresh /dev and /proc, no network, ``results`` the one writable
    file; the marker variable tells the script it is inside."""
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--bind", results, results, "--unshare-net",
            "--die-with-parent", "--new-session", "--setenv", SANDBOX_ENV, "1",
            sys.executable, os.path.abspath(__file__)] + list(argv)


def add_roots(roots):
    """In a forked child: put ``roots`` on sys.path right after this tree's root."""
    i = sys.path.index(L.ROOT) + 1 if L.ROOT in sys.path else 0
    sys.path[i:i] = list(roots)
    importlib.invalidate_caches()


def caffepy_tree():
    """The git tree hash of caffepy/ (what is measured; commits touching only tools/ keep it)."""
    out = subprocess.run(["git", "-C", L.ROOT, "rev-parse", "HEAD:caffepy"], capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", L.ROOT, "status", "--porcelain", "caffepy"],
                           capture_output=True, text=True).stdout.strip()
    return out + ("-dirty" if dirty else "")


def measure_file(row, tree, cache=L.CACHE, roots=(), path=None):
    """The record of one manifest row (see module doc); ``roots``: the directories of its
    repository's Python layer modules; ``path``: where to read it (census_lib.RepositoryTrees;
    default the cache)."""
    path = path or L.cache_path(row["sha256"], cache)
    rec = {"sha256": row["sha256"], "repo": row["repo"], "path": row["path"],
           "split": row["split"], "tree": tree}
    prep = functools.partial(add_roots, roots) if roots else None
    if roots:
        rec["modules"] = len(roots)
    t0 = time.time()
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    skip, deploy, test_layers = Z.classify(text)
    rec["deploy_with_inputs"] = bool(deploy)
    if rec["split"] == "census":
        layers, _ = Z.scan(text)
        rec["types"] = sorted({l["type"] for l in layers if l["type"]})
    ok, phase, lerr = attempt(path, [], test_layers, prepare=prep)
    rec["lenient"] = ok
    if ok:
        rec["read"] = True
    else:
        with tempfile.TemporaryDirectory() as d:
            rc, _, derr, _ = Z.run_cli(["draw", path, "-o", os.path.join(d, "x.dot")],
                                       prepare=prep)
        rec["read"] = rc == 0
        if rc != 0:
            rec.update(category=Z.category(rc, derr), error=Z.last_line(derr), failed="read")
        else:
            rec.update(category=cat(lerr), error=clean(lerr), failed="lenient")
    if ok:
        serr = lerr
        differs = any(mark in lerr for mark in _DIFFERS)
        if differs:                   # fields dropped or not computed, shapes carried
            _, _, serr = attempt(path, ["--strict"], test_layers, phase, prep)
        unresolved = [l for l in serr.splitlines() if "are shown as '?'" in l]
        strict_failed = differs and not _ok(serr)
        rec["complete"] = not strict_failed and not unresolved
        if strict_failed:
            rec.update(category=cat(serr), error=clean(serr), failed="complete")
        elif unresolved:
            line = unresolved[0]
            rec.update(category="unknown_type" if "unknown layer type" in line else "unbuilt_end",
                       error=line.split("summary.py", 1)[-1].strip(" ]:"), failed="complete")
    else:
        rec["complete"] = False
    rec["runnable"] = None
    if deploy:
        if rec["complete"]:
            okf, errf, catf = F.run_forward(path, prepare=prep, phase=phase)
            rec["runnable"] = okf
            if not okf:
                rec.update(category=catf, error=errf, failed="runnable")
        else:
            rec["runnable"] = False
    if "error" in rec:
        rec["error"] = rec["error"].replace(path, "FILE")[:400]
        rec["error"] = rec["error"].split("; known types:")[0]
    if rec["split"] != "census":
        rec.pop("error", None)
    rec["seconds"] = round(time.time() - t0, 2)
    return rec


_DROPPED = "--strict makes it an error"
_HARVESTED = "read for the structure only"
_REPAIRED = ("--strict refuses them", "--strict too")      # text Caffe's parser refuses
_CARRIED = "\x00carried"
_NO_TOPS = "listed without shapes (no tops)"   # a layer without class or rule and without tops
_UNBUILT = "and no shape rule"      # no class, no rule: its tops and their readers shown as ?
_OK = "\x00ok"
_DIFFERS = (_DROPPED, _HARVESTED, _CARRIED, _NO_TOPS, _UNBUILT) + _REPAIRED


def _ok(err):
    return err.endswith(_OK)


def cat(err):
    return "timeout" if Z.last_line(err).startswith("timeout (") else Z.category(1, err)


def clean(err):
    return Z.last_line(err.replace(_OK, "").replace(_CARRIED, ""))


def attempt(path, extra, test_layers, phase=None, prepare=None):
    """``caffepy summary FILE`` (+ extra) as a user runs it: phase TEST, then TRAIN when TEST has
    no layers or the error says the data is TRAIN's (tools/zoo_survey.attempt's rule); ``phase``
    given: that phase only. Returns (ok, phase, stderr); a passing run's stderr ends in _OK."""
    run = functools.partial(Z.run_cli, prepare=prepare)
    if phase is None:
        phase = "TEST"
        rc, out, err, _ = run(["summary", path] + extra)
        if (rc != 0 and Z._PHASE.search(Z.last_line(err))) or not test_layers:
            phase = "TRAIN"
            rc, out, err, _ = run(["summary", path, "--phase", "TRAIN"] + extra)
    else:
        rc, out, err, _ = run(["summary", path, "--phase", phase] + extra)
    if rc == "timeout":
        err += "\ntimeout (%ds)" % Z.TIMEOUT
    from caffepy.zoo.summary import CARRIED_NOTE
    if rc == 0 and CARRIED_NOTE in out:         # a layer without a class, its shape carried
        err += _CARRIED
    return rc == 0, phase, err + (_OK if rc == 0 else "")


def load_results(path=RESULTS):
    """{(sha256, tree): the last record}; a record measured with modules is not replaced by one
    measured without."""
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    key = (r["sha256"], r["tree"])
                    if "modules" in r or "modules" not in out.get(key, {}):
                        out[key] = r
    return out


def plan(manifest, results, tree, mods, cache=L.CACHE, py_dir=None):
    """[(manifest row, module roots)] not measured yet at ``tree``: no record, or, where the
    file's repository has modules for it, a record without modules or with another number of
    module directories than the rule gives now (``pymods.roots_for``)."""
    have = {r["repo"] for r in mods if r["status"] == "found"}
    out = []
    for row in manifest:
        roots = []
        if row["repo"] in have:
            with open(L.cache_path(row["sha256"], cache), "rb") as f:
                text = f.read().decode("utf-8", "replace")
            roots = pymods.roots_for(row["repo"], row["path"], text, mods, py_dir)
        prev = results.get((row["sha256"], tree))
        if prev is None or (roots and prev.get("modules") != len(roots)):
            out.append((row, roots))
    return out


def summary(results, tree):
    rows = [r for (sha, t), r in results.items() if t == tree]
    manifest = {r["sha256"] for r in L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)}
    rows = [r for r in rows if r["sha256"] in manifest]
    out = {"caffepy_tree": tree, "splits": {}}
    for split in ("census", "heldout"):
        rs = [r for r in rows if r["split"] == split]
        dep = [r for r in rs if r["deploy_with_inputs"]]
        s = {"files": len(rs), "repositories": len({r["repo"] for r in rs}),
             "read": sum(r["read"] for r in rs), "lenient": sum(r["lenient"] for r in rs),
             "complete": sum(r["complete"] for r in rs),
             "deploy_with_inputs": len(dep), "runnable": sum(bool(r["runnable"]) for r in dep)}
        # 95% intervals of the complete share, by a bootstrap over repositories
        s["complete_interval"] = L.share_interval(rs, "complete")
        if split == "census":
            s["failure_categories"] = dict(collections.Counter(
                "%s:%s" % (r["failed"], r.get("category")) for r in rs if "failed" in r))
        out["splits"][split] = s
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--summary", action="store_true", help="write results_summary.json and stop")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--split", choices=("census", "heldout"), help="only this split's files")
    p.add_argument("--python-layers", action="store_true",
                   help="only files measured with their repository's Python layer modules")
    p.add_argument("--sha", action="append", default=[], metavar="PREFIX",
                   help="only the files whose sha256 starts with PREFIX (repeatable)")
    p.add_argument("--results", default=RESULTS, help="the results file (default %(default)s)")
    p.add_argument("--tree", help="with --summary: the records of this caffepy tree (its full "
                                  "hash) instead of this checkout's")
    p.add_argument("--shard", default="0/1", metavar="K/N",
                   help="measure only the files whose sha256 is K modulo N, so N runs, each with "
                        "its own --results, share the work (and each resumes its own)")
    args = p.parse_args(argv)
    args.results = os.path.abspath(args.results)
    sys.path.insert(0, L.ROOT)
    tree = args.tree or caffepy_tree()
    results = load_results(args.results)
    if args.summary:
        with open(SUMMARY, "w") as f:
            json.dump(summary(results, tree), f, indent=1, sort_keys=True)
            f.write("\n")
        print(open(SUMMARY).read())
        return 0
    manifest = [r for r in L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)
                if not args.split or r["split"] == args.split]
    cached = [r for r in manifest if os.path.exists(L.cache_path(r["sha256"]))]
    todo = plan(cached, results, tree, L.read_table(L.PYMODS, L.PYMOD_COLUMNS))
    if args.python_layers:
        todo = [t for t in todo if t[1]]
    if args.sha:
        todo = [t for t in todo if t[0]["sha256"].startswith(tuple(args.sha))]
    k, n = (int(x) for x in args.shard.split("/"))
    if not 0 <= k < n:
        p.error("--shard K/N needs 0 <= K < N")
    todo = [t for t in todo if int(t[0]["sha256"], 16) % n == k]
    if args.limit:
        todo = todo[:args.limit]
    if os.environ.get(SANDBOX_ENV) != "1":
        if shutil.which("bwrap"):
            open(args.results, "a").close()
            cmd = sandbox_argv(args.results, sys.argv[1:] if argv is None else argv)
            os.execvp(cmd[0], cmd)
        if any(roots for _, roots in todo):
            print("measure.py: %d files run their repository's Python layer modules and are "
                  "measured only inside bwrap, which is not installed (apt-get install "
                  "bubblewrap); nothing measured" % sum(bool(t[1]) for t in todo),
                  file=sys.stderr)
            return 2
    if len(cached) < len(manifest):
        print("measure.py: %d of %d files are not in the cache (%s; tools/census/recache.py "
              "restores them from fetched mirrors) and are not measured"
              % (len(manifest) - len(cached), len(manifest), L.CACHE), file=sys.stderr)
    import caffepy.cli
    caffepy.cli.build_parser()
    # a net may write files (HDF5Output, a Python layer): keep them out of the repository
    os.chdir(tempfile.mkdtemp(prefix="census-measure-"))
    trees = L.RepositoryTrees(L.repository_files(
        L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS),
        L.read_table(L.DUPLICATES, L.DUPLICATE_COLUMNS)), tempfile.mkdtemp(prefix="census-repos-"))
    with open(args.results, "a") as f:
        for i, (row, roots) in enumerate(todo):
            rec = measure_file(row, tree, roots=roots, path=trees.path_of(row))
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            f.flush()
            state = "complete" if rec["complete"] else "lenient" if rec["lenient"] else \
                "read" if rec["read"] else "none"
            print("[%d/%d] %-8s %5.1fs %s" % (i + 1, len(todo), state, rec["seconds"],
                                              rec["split"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
