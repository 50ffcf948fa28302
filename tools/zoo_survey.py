#!/usr/bin/env python3
"""Survey: how well caffepy builds Caffe net files it has never seen, as a new user would.

Each net file goes through caffepy's own command, in process, in a fresh forked process per run
(60 s limit each, stdout and stderr captured):

1. ``caffepy summary FILE`` (phase TEST). When that fails with a phase problem ("... produced only
   in phase TRAIN ... --phase TRAIN") or the file has no layer in phase TEST, the user's retry
   ``caffepy summary FILE --phase TRAIN`` is run and its result kept.
2. When (1) fails, the same again with ``--ignore-unknown-fields``, recorded apart (``ok_lenient``).

A run that exits 0 but shows layers with ``?`` tops because a layer before them has no class and
no shape rule (caffepy.zoo.shape_rules) fails as that unknown type; ``?`` layers nothing depends
on (the end of a net) and shapes a rule carries pass, as end layers did before shape rules.

Skipped (listed, not measured): solver files (``net:`` / ``train_net:`` / ``base_lr`` and no layer
block, or a solver with an inline ``net_param``) and files with no ``layer {`` / ``layers {`` block.

Each failure gets a category from its one-line error (the last line of stderr; an unknown type's
list of known types cut): ``no_field`` (no field named, unknown enum value, or a fork's repeated
field where caffepy's is single), ``unknown_type``, ``shape`` (shape, Concat, Eltwise, Reshape,
size mismatches), ``python_data`` (a Python data layer whose module cannot be imported: counted
apart, never as passing), ``parse`` (other text-format errors), ``timeout``, ``crash`` (a raw
traceback: a bug in caffepy) and ``other``. ``deploy_with_inputs``: the file declares ``input:`` /
``input_shape`` / ``input_dim`` or an Input layer and has no data layer.

Rerunning the survey (the net files are third-party and not in this repository):

1. For each line of ``tools/survey/repos.tsv`` (repo, commit, path, local path), fetch the
   repository and write the file at that commit to ``DIR/<local path>``, e.g.
   ``git --git-dir=<owner+name>.git show COMMIT:PATH > DIR/<owner>__<name>/PATH``.
2. ``python3 tools/zoo_survey.py DIR --repos tools/survey/repos.tsv -o out.json -j 2``
3. ``python3 tools/zoo_survey.py --tally out.json`` prints the per-repository table, the totals,
   the categories and the most common errors.

Without ``--repos`` every ``*.prototxt`` / ``*.pt`` under DIR is measured; its repository is read
from the first folder (``owner__name``). The caffepy measured is the one this file sits beside.
The static scan that skips files and finds ``deploy_with_inputs`` (``scan``, ``classify``) is in
tools/zoo_survey_scan.py.
"""
import argparse
import collections
import json
import multiprocessing
import os
import re
import signal
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:        # zoo_survey_scan beside it, also when loaded by file path
    sys.path.insert(0, HERE)
from zoo_survey_scan import classify, in_test, is_data, scan  # noqa: E402,F401

TIMEOUT = 60
CATEGORIES = ("no_field", "unknown_type", "shape", "python_data", "parse", "timeout", "crash",
              "other")

# ---------------------------------------------------------------------------- running caffepy


def wait_child(pid, t0, timeout):
    """The exit code of forked child ``pid`` (started at ``t0``), or "timeout" after killing it
    once ``timeout`` seconds have passed."""
    while time.time() - t0 < timeout:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


def run_cli(argv, timeout=TIMEOUT, prepare=None):
    """caffepy.cli.main(argv) in a forked child: (rc or 'timeout', stdout, stderr, seconds).
    ``prepare``: called in the child first (e.g. to put a repository's modules on sys.path)."""
    from caffepy import cli
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.time()
        pid = os.fork()
        if pid == 0:                                   # child
            rc = 70
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                # fresh streams on fds 1 and 2 (the parent's may be a capture, as under pytest)
                sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
                sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
                os.environ.pop("CAFFEPY_DEBUG", None)
                try:
                    if prepare is not None:
                        prepare()
                    rc = cli.main(argv)
                except SystemExit as e:
                    rc = e.code if isinstance(e.code, int) else 2
                except BaseException:
                    traceback.print_exc()
                    rc = 70
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(rc if isinstance(rc, int) else 1)
        rc = wait_child(pid, t0, timeout)
        secs = time.time() - t0
        out.seek(0)
        err.seek(0)
        return rc, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"), \
            secs


def last_line(stderr):
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    return lines[-1] if lines else ""


_PHASE = re.compile(r"produced only in phase TRAIN|--phase TRAIN|in phase TRAIN")
_SHAPE = re.compile(r"shape|concat|eltwise|reshape|size|mismatch|dimension|axis|axes|count|"
                    r"channels|divisib|must (?:be|match|equal|hold)|out of range|broadcast|"
                    r"is empty", re.I)
# A fork's repeated field where caffepy's is single: 'kernel_size: [1, 2, 2]' or three kernel_size
_FORK_REPEATED = re.compile(r"should not have multiple|: Couldn't parse \w+: \[")


def category(rc, stderr):
    """The failure category of one run (None when it passed)."""
    if rc == 0:
        return None
    if rc == "timeout":
        return "timeout"
    if "Traceback (most recent call last)" in stderr:
        return "crash"
    line = last_line(stderr)
    if "is not importable" in line and "(Python)" in line:
        return "python_data"
    if "unknown layer type" in line:
        return "unknown_type"
    if "is known only from forks" in line:      # a harvested fork field caffepy does not compute
        return "fork_field"
    if "no field named" in line or re.search(r"no value (named|numbered)", line) or \
            _FORK_REPEATED.search(line):
        return "no_field"
    if re.search(r":\d+:\d+: ", line) or re.search(r"Expected|Couldn't parse|parse", line):
        return "parse"
    if _SHAPE.search(line):
        return "shape"
    return "other"


_NO_CLASS = re.compile(r"layer '([^']*)' \(type ([^\s),]+)[^)]*\): no class and no shape rule"
                       r".*shown as '\?' with the (\d+) layer\(s\) that depend on its tops")


def _unbuilt(err):
    """summary passed (exit 0) but listed a layer caffepy has no class for, and no shape rule,
    with layers depending on it (all shown with '?' tops): the one-line error the file counts
    with (an unknown type's), else None. '?' layers nothing depends on (the end of a net) and
    layers whose shapes a rule carries leave the table complete, as before them."""
    m = _NO_CLASS.search(err)
    if m is None:
        return None
    return "layer '%s': unknown layer type '%s' (summary: shown as '?' with %s layer(s) after it)" \
        % m.groups()


def attempt(path, extra, test_layers):
    """The user's run (TEST, then TRAIN on a phase problem): (ok, phase, error, category, secs).
    A run that shows layers with '?' tops because one before them has no class (and no shape
    rule) is counted as that unknown type's failure."""
    rc, _, err, secs = run_cli(["summary", path] + extra)
    phase = "TEST"
    if (rc != 0 and _PHASE.search(last_line(err))) or not test_layers:
        rc2, _, err2, secs2 = run_cli(["summary", path, "--phase", "TRAIN"] + extra)
        rc, err, secs, phase = rc2, err2, secs + secs2, "TRAIN"
    unbuilt = _unbuilt(err) if rc == 0 else None
    if unbuilt is not None:
        return False, phase, unbuilt, "unknown_type", secs
    error = "" if rc == 0 else "timeout (%ds)" % TIMEOUT if rc == "timeout" else last_line(err)
    error = re.sub(r"; known types: .*", "; known types: ...", error)   # the list is 2 kB
    return rc == 0, phase, error, category(rc, err), secs


def measure(job):
    """One file: the JSON record (``skipped`` set for files that are not measured)."""
    repo, commit, local, full = job
    rec = {"repo": repo, "commit": commit, "path": local}
    try:
        with open(full, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        rec["skipped"] = "unreadable: %s" % e
        return rec
    skip, deploy, test_layers = classify(text)
    if skip:
        rec["skipped"] = skip
        return rec
    ok, phase, error, cat, secs = attempt(full, [], test_layers)
    error = error.replace(full, local)
    rec.update(ok=ok, phase=phase, error=error, category=cat, deploy_with_inputs=deploy)
    if ok:
        rec.update(ok_lenient=True, error_lenient="", category_lenient=None)
    else:
        okl, _, errl, catl, secs2 = attempt(full, ["--ignore-unknown-fields"], test_layers)
        rec.update(ok_lenient=okl, error_lenient=errl.replace(full, local), category_lenient=catl)
        secs += secs2
    rec["seconds"] = round(secs, 2)
    return rec


def read_repos(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                repo, commit, src, local = line.rstrip("\n").split("\t")[:4]
                rows.append((repo, commit, src, local))
    return rows


def jobs_for(directory, repos_tsv):
    if repos_tsv:
        return [(repo, commit, local, os.path.join(directory, local))
                for repo, commit, _, local in read_repos(repos_tsv)]
    jobs = []
    for base, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            if name.lower().endswith((".prototxt", ".pt")):
                full = os.path.join(base, name)
                local = os.path.relpath(full, directory)
                repo = local.split(os.sep)[0].replace("__", "/", 1)
                jobs.append((repo, "", local, full))
    return jobs


def survey(args):
    sys.path.insert(0, ROOT)
    import caffepy.cli                               # noqa: F401 -- imported once, before forking
    caffepy.cli.build_parser()
    jobs = jobs_for(args.dir, args.repos)
    if args.limit:
        jobs = jobs[:args.limit]
    ctx = multiprocessing.get_context("fork")
    records = []
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        for i, rec in enumerate(pool.imap(measure, jobs, chunksize=1)):
            records.append(rec)
            if not args.quiet:
                state = rec.get("skipped") and "skip" or ("ok" if rec["ok"] else rec["category"])
                print("[%d/%d] %-12s %s" % (i + 1, len(jobs), state, rec["path"]), flush=True)
    from caffepy import __version__
    try:                                                 # the tree measured, when it is a checkout
        import subprocess
        head = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        head = ""
    out = {"tool": "tools/zoo_survey.py", "caffepy": __version__, "tree": head,
           "timeout_s": TIMEOUT,
           "files": [r for r in records if "skipped" not in r],
           "skipped": [r for r in records if "skipped" in r]}
    write_json(out, args.output)
    print("wrote %s: %d measured, %d skipped" % (args.output, len(out["files"]),
                                                   len(out["skipped"])))

def write_json(data, path):
    """The survey's JSON with one record per line (small, and diffs line by line)."""
    with open(path, "w") as f:
        f.write("{\n")
        for i, key in enumerate(sorted(data)):
            value = data[key]
            if isinstance(value, list):
                body = ",\n".join("  " + json.dumps(r, sort_keys=True) for r in value)
                text = "[\n%s\n ]" % body if value else "[]"
            else:
                text = json.dumps(value)
            f.write(' "%s": %s%s\n' % (key, text, "," if i < len(data) - 1 else ""))
        f.write("}\n")

# ---------------------------------------------------------------------------- tally


def normalise(msg, path):
    msg = msg.replace("caffepy summary: error: ", "").replace(path, "FILE")
    msg = re.sub(r"(layer|blob|bottom|top) '[^']*'", r"\1 '…'", msg)
    return re.sub(r"\d+", "N", msg)


def pct(a, b):
    return "%d / %d (%.1f%%)" % (a, b, 100.0 * a / b) if b else "%d / 0" % a


def tally(data, top=30):
    files = data["files"]
    lines = []
    by_repo = collections.OrderedDict()
    for r in sorted(files, key=lambda r: r["repo"].lower()):
        by_repo.setdefault(r["repo"], []).append(r)
    w = max([len(r) for r in by_repo] + [10])
    lines.append("%-*s  %-12s  %5s  %5s  %7s  %7s" % (w, "repository", "commit", "files", "build",
                                                      "lenient", "py-data"))
    for repo, rs in by_repo.items():
        lines.append("%-*s  %-12s  %5d  %5d  %7d  %7d" % (
            w, repo, rs[0]["commit"][:12], len(rs), sum(r["ok"] for r in rs),
            sum(r["ok_lenient"] for r in rs), sum(r["category"] == "python_data" for r in rs)))
    n, ok, okl = len(files), sum(r["ok"] for r in files), sum(r["ok_lenient"] for r in files)
    pd = sum(r["category"] == "python_data" for r in files)
    dep = [r for r in files if r["deploy_with_inputs"]]
    lines += ["", "caffepy tree measured: %s" % (data.get("tree") or "?"),
              "repositories: %d, net files: %d, skipped (solvers, no layers): %d"
              % (len(by_repo), n, len(data.get("skipped", []))),
              "build, all files:                 %s" % pct(ok, n),
              "build, excluding python_data:     %s" % pct(ok, n - pd),
              "lenient, all files:               %s" % pct(okl, n),
              "lenient, excluding python_data:   %s" % pct(okl, n - pd),
              "deploy_with_inputs files:         %s of all; build %s, lenient %s"
              % (pct(len(dep), n), pct(sum(r["ok"] for r in dep), len(dep)),
                 pct(sum(r["ok_lenient"] for r in dep), len(dep))),
              "passed in phase TRAIN (retry):    %d" % sum(r["ok"] and r["phase"] == "TRAIN"
                                                          for r in files),
              "", "failures by category (strict; lenient):"]
    cat = collections.Counter(r["category"] for r in files if not r["ok"])
    catl = collections.Counter(r["category_lenient"] for r in files if not r["ok_lenient"])
    for c in CATEGORIES:
        lines.append("  %-13s %4d  %4d" % (c, cat[c], catl[c]))
    for key, what, k in (("error", "strict", top),
                         ("error_lenient", "--ignore-unknown-fields", 15)):
        msgs = collections.Counter(normalise(r[key], r["path"]) for r in files if r[key])
        lines += ["", "most common errors (%s, normalised):" % what]
        lines += ["  %4d  %s" % (n, m) for m, n in msgs.most_common(k)]
    types, typesl = collections.Counter(), collections.Counter()
    for r in files:
        for counter, err in ((types, r["error"]), (typesl, r["error_lenient"])):
            m = re.search(r"unknown layer type '([^']*)'", err)
            if m:
                counter[m.group(1)] += 1
    lines += ["", "unknown layer types (files: strict; with --ignore-unknown-fields):"]
    lines += ["  %4d  %4d  %s" % (types[t], typesl[t], t)
              for t, _ in (types + typesl).most_common()]
    fields = collections.Counter()
    for r in files:
        if r["category"] != "no_field":
            continue
        m = re.search(r'no field named "(\w+)" in ([\w.]+)', r["error"])
        if m:
            fields[(m.group(2), "." + m.group(1))] += 1
            continue
        m = re.search(r"no value (?:named|numbered) (\S+) in enum [\w.]+ of field ([\w.]+)",
                      r["error"])
        if m:
            fields[(m.group(2), " = " + m.group(1))] += 1
            continue
        m = re.search(r'Message type "(\w+)" should not have multiple "(\w+)"', r["error"])
        if m:
            fields[(m.group(1), "." + m.group(2) + " (repeated)")] += 1
            continue
        m = re.search(r"' (\w+): \[", r["error"])
        fields[("?", "." + m.group(1) + ": [list]") if m else ("?", " " + r["error"])] += 1
    lines += ["", "missing fields / enum values (message.field: files):"]
    lines += ["  %4d  %s%s" % (k, m, f) for (m, f), k in fields.most_common()]
    crashes = [r for r in files if r["category"] == "crash" or r["category_lenient"] == "crash"]
    lines += ["", "crashes (raw tracebacks):"]
    lines += ["  %s: %s" % (r["path"], r["error"] if r["category"] == "crash"
                            else r["error_lenient"]) for r in crashes] or ["  none"]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", nargs="?", help="folder of net files (<owner>__<name>/<path>)")
    p.add_argument("--repos", help="repos.tsv: repo, commit, path, local path (measure these)")
    p.add_argument("-o", "--output", default="zoo_survey.json", help="JSON to write")
    p.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--limit", type=int, default=0, help="measure only the first N files")
    p.add_argument("--quiet", action="store_true", help="no per-file progress lines")
    p.add_argument("--tally", metavar="JSON", help="print the tables of a survey's JSON and stop")
    args = p.parse_args(argv)
    if args.tally:
        with open(args.tally) as f:
            print(tally(json.load(f)))
        return 0
    if not args.dir:
        p.error("give DIR (or --tally JSON)")
    survey(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
