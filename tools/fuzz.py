#!/usr/bin/env python
"""Fuzz every reader of untrusted input: N cases per reader, each run in a forked child with a time
limit and a memory cap (tests/fuzz/harness.py); prints per reader the cases run and the escapes
(outcomes other than success or a one-line caffepy error naming the file or rank).

    python tools/fuzz.py -n 10000                  # every reader, 10000 cases each
    python tools/fuzz.py -n 500 caffemodel frames  # some readers
    python tools/fuzz.py --atheris caffemodel      # coverage-guided (pip install atheris)

Exit status 1 when anything escaped; the first input of each kind of escape is saved under
``--out`` (default fuzz-escapes/).
"""
import argparse
import collections
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))

import harness  # noqa: E402
import readers  # noqa: E402


def _save(out_dir, name, seed, why):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "%s-%d.txt" % (name, seed))
    with open(path, "w") as f:
        f.write("replay: python tools/fuzz.py --replay %d %s\n\n%s\n" % (seed, name, why))
    return path


def run(names, n, seed, out_dir, verbose):
    workdir = tempfile.mkdtemp(prefix="caffepy-fuzz-")
    readers.warm()
    total = escapes_all = 0
    for name, family, make in readers.TARGETS:
        if names and name not in names:
            continue
        t0, escapes, kinds = time.time(), 0, collections.Counter()
        for i in range(n):
            case_seed = seed * 1000003 + i
            src = harness.Source(random.Random("%s:%d" % (name, case_seed)))
            why, _ = readers.run_one(make, src, workdir)
            if why:
                escapes += 1
                key = why.split("\n")[0][:120]
                if not kinds[key]:
                    saved = _save(out_dir, name, case_seed, why)
                    if verbose:
                        print("  %s: %s (%s)" % (name, key, saved), flush=True)
                kinds[key] += 1
        total += n
        escapes_all += escapes
        print("%-16s cases %7d  escapes %5d  (%.0f s)" % (name, n, escapes, time.time() - t0),
              flush=True)
        for key, count in kinds.most_common(5):
            print("    %5d  %s" % (count, key))
    print("total            cases %7d  escapes %5d" % (total, escapes_all))
    return 1 if escapes_all else 0


def replay(name, case_seed):
    make = {t[0]: t[2] for t in readers.TARGETS}[name]
    workdir = tempfile.mkdtemp(prefix="caffepy-fuzz-")
    readers.warm()
    why, out = readers.run_one(make, harness.Source(random.Random("%s:%d" % (name, case_seed))), workdir)
    print(why or "no escape: %r" % out)
    return 1 if why else 0


def atheris_mode(names, runs):
    """Coverage-guided: atheris drives the bytes a Source draws its choices from. The reader runs in
    this process (no time limit or memory cap; atheris reports crashes and slow inputs itself)."""
    import atheris
    name = names[0] if names else "caffemodel"
    make = {t[0]: t[2] for t in readers.TARGETS}[name]
    workdir = tempfile.mkdtemp(prefix="caffepy-fuzz-")
    readers.warm()

    class FdpSource(harness.Source):
        def __init__(self, fdp):
            self.fdp = fdp

        def int(self, lo, hi):
            return self.fdp.ConsumeIntInRange(lo, hi)

        def bytes(self, n):
            b = self.fdp.ConsumeBytes(n)
            return b + b"\0" * (n - len(b))

    def one(data):              # in process, so that atheris sees the coverage
        fn, args, where = make(FdpSource(atheris.FuzzedDataProvider(data)), workdir)
        try:
            fn(*args)
        except harness.CaffeError as e:
            why = harness.problem(harness.Outcome("error", type(e).__name__, str(e)), where)
            if why:
                raise AssertionError(why)

    make(harness.Source(random.Random(0)), workdir)      # import what the reader uses, then
    atheris.instrument_all()                             # instrument every loaded function

    argv = [sys.argv[0]] + (["-runs=%d" % runs] if runs else [])
    atheris.Setup(argv, one)
    atheris.Fuzz()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("readers", nargs="*", help="reader names (default: all): %s"
                   % " ".join(t[0] for t in readers.TARGETS))
    p.add_argument("-n", type=int, default=1000, help="cases per reader")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="fuzz-escapes")
    p.add_argument("--replay", type=int, metavar="SEED", help="run one case again (one reader)")
    p.add_argument("--atheris", action="store_true", help="coverage-guided mode (one reader)")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    unknown = set(a.readers) - {t[0] for t in readers.TARGETS}
    if unknown:
        p.error("unknown reader(s): %s" % " ".join(sorted(unknown)))
    if a.replay is not None:
        return replay(a.readers[0], a.replay)
    if a.atheris:
        return atheris_mode(a.readers, a.n)
    return run(a.readers, a.n, a.seed, a.out, a.verbose)


if __name__ == "__main__":
    sys.exit(main())
