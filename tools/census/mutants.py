"""Run caffepy over mutants of the census split's files and count raw tracebacks.

    python3 tools/census/mutants.py [--files 200] [--per-file 5] [--seed 1] [--timeout 30]
                                    [--forward] [--results RESULTS]

Files from repositories nobody has seen differ from the census's in the values they give: odd
kernel sizes, axes past the blob's, negative or zero counts, a bottom missing, a layer of another
type where a known one stood. Each mutant is a census-split file that builds completely (the
latest record of ``--results``; files whose Python layers need their repository's modules and the
held-out split are left out) with one to three edits of its text, drawn from ``--seed``:

* ``number``: a number after a field name becomes another (0, 1, 2, 3, -1, -2, 7, 1000, 0.5, -0.5,
  1e-9);
* ``drop``: a line naming a ``bottom``, ``top``, ``dim``, ``kernel_size``, ``stride``, ``pad``,
  ``axis`` or a ``*_param`` field removed;
* ``add``: a field line (``axis: -1``, ``pad: 1``, ``group: 2``, ``bottom: "data"`` ...) put
  after a layer's ``type`` line;
* ``type``: a layer's type string replaced by another type the census split uses.

Each mutant is written to a scratch directory and read by ``caffepy summary`` (lenient, in a
forked child, as measure.py runs it) and, with ``--forward``, by the census forward pass when it
builds. A run ends ``ok``, ``error`` (a one-line error), ``timeout`` or ``traceback`` (a raw
traceback on stderr: a caffepy defect whatever the input). Prints one line per traceback or
timeout (the file's sha256, the edits, the last line) and the counts; exit status 1 when any
traceback.
"""
import argparse
import collections
import json
import os
import random
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import census_lib as L  # noqa: E402
import commands as C  # noqa: E402

NUMBERS = ("0", "1", "2", "3", "-1", "-2", "7", "1000", "0.5", "-0.5", "1e-9")
DROPPABLE = re.compile(r"^\s*(bottom|top|dim|kernel_size|kernel_h|kernel_w|stride|pad|axis|"
                       r"num_output|group|\w+_param\s*\{.*\})\s*:?")
ADDED = ('axis: -1', 'axis: 3', 'pad: 1', 'group: 2', 'stride: 3', 'kernel_size: 1',
         'bottom: "data"', 'top: "extra"', 'num_output: 1', 'dilation: 2')
FIELD_NUMBER = re.compile(r"(\b[a-z_0-9]+\s*:\s*)(-?\d+(?:\.\d*)?(?:[eE]-?\d+)?)")
TYPE_LINE = re.compile(r'(\btype\s*:\s*")([^"]*)(")')


def mutate(text, rng, types):
    """(mutant text, [edit descriptions]) of ``text``."""
    edits = []
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(("number", "number", "drop", "add", "type"))
        if op == "number":
            spots = [(i, m) for i, line in enumerate(lines) for m in FIELD_NUMBER.finditer(line)]
            if spots:
                i, m = rng.choice(spots)
                new = rng.choice(NUMBERS)
                lines[i] = lines[i][:m.start(2)] + new + lines[i][m.end(2):]
                edits.append("line %d: %s%s" % (i + 1, m.group(1).strip(), new))
        elif op == "drop":
            spots = [i for i, line in enumerate(lines) if DROPPABLE.match(line)]
            if spots:
                i = rng.choice(spots)
                edits.append("line %d dropped: %s" % (i + 1, lines[i].strip()[:60]))
                lines[i] = ""
        elif op == "add":
            spots = [i for i, line in enumerate(lines) if TYPE_LINE.search(line)]
            if spots:
                i = rng.choice(spots)
                new = rng.choice(ADDED)
                lines[i] = lines[i] + " " + new
                edits.append("line %d: + %s" % (i + 1, new))
        elif types:
            spots = [i for i, line in enumerate(lines) if TYPE_LINE.search(line)]
            if spots:
                i = rng.choice(spots)
                new = rng.choice(types)
                lines[i] = TYPE_LINE.sub(lambda m: m.group(1) + new + m.group(3), lines[i], 1)
                edits.append("line %d: type %s" % (i + 1, new))
    return "\n".join(lines), edits


def census_types(records):
    """The current-form type names of the census split's complete files, most used first."""
    count = collections.Counter()
    for r in records.values():
        if r.get("complete"):
            count.update(t for t in r.get("types", ()) if not t.isupper())
    return [t for t, _ in count.most_common(150)]


def caffe_errors():
    """The names of caffepy's error classes (a one-line refusal when the forward pass ends in
    one)."""
    from caffepy import errors

    def walk(cls):
        yield cls.__name__
        for sub in cls.__subclasses__():
            yield from walk(sub)
    return set(walk(errors.CaffeError))


def ends(rc, err):
    if rc == "timeout":
        return "timeout"
    if C.TRACEBACK in err:
        return "traceback"
    return "ok" if rc == 0 else "error"


def main(argv=None):
    import zoo_survey as Z
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(L.DATA, "results.json"))
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--per-file", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--forward", action="store_true")
    args = ap.parse_args(argv)
    records = {s: r for s, r in C.latest_records(args.results).items()
               if r.get("complete") and "modules" not in r}
    types = census_types(records)
    shas = sorted(records)
    rng = random.Random(args.seed)
    rng.shuffle(shas)
    counts = collections.Counter()
    import forward as F
    refusals = caffe_errors()
    with tempfile.TemporaryDirectory(prefix="census-mutants-") as scratch:
        os.chdir(scratch)
        for sha in shas[:args.files]:
            path = os.path.join(L.CACHE, sha + ".prototxt")
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            for k in range(args.per_file):
                mutant, edits = mutate(text, rng, types)
                mpath = os.path.join(scratch, "m.prototxt")
                with open(mpath, "w") as f:
                    f.write(mutant)
                rc, _, err, _ = Z.run_cli(["summary", mpath, "--ignore-unknown-fields"],
                                          timeout=args.timeout)
                end = ends(rc, err)
                counts["summary " + end] += 1
                if end == "ok" and args.forward and records[sha].get("deploy_with_inputs"):
                    ok, line, cat = F.run_forward(mpath, timeout=args.timeout)
                    refused = line.split(":")[0] in refusals or \
                        re.match(r"ValueError: output '.*' is not finite", line)
                    fend = "ok" if ok else "timeout" if cat == "timeout" else \
                        "error" if refused else "traceback"
                    counts["forward " + fend] += 1
                    if fend in ("traceback", "timeout"):
                        print("forward %s %s #%d %s | %s" % (
                            fend, sha[:12], k, "; ".join(edits), line[:220]), flush=True)
                if end in ("traceback", "timeout"):
                    print("summary %s %s #%d %s | %s" % (
                        end, sha[:12], k, "; ".join(edits), Z.last_line(err)[:220]), flush=True)
    print(json.dumps(dict(sorted(counts.items()))))
    return 1 if counts["summary traceback"] or counts["forward traceback"] else 0


if __name__ == "__main__":
    sys.exit(main())
