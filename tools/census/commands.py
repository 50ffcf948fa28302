"""Run caffepy's other commands over the census split's cached files and count how each ends.

    python3 tools/census/commands.py [--commands export,draw-shapes,upgrade] [--limit N]
                                     [--timeout 120] [--seed 7]

``measure.py`` measures ``summary``, ``draw`` (only where summary fails) and a forward pass. The
commands here read the same files in other ways: ``export`` (``caffepy export FILE -o x.onnx``,
fillers' values), ``draw-shapes`` (``caffepy draw FILE --shapes --json x.json -o x.dot``) and
``upgrade`` (``caffepy upgrade_net_proto_text FILE x.prototxt``, files with V1 ``layers``
blocks). Each run is a fresh process in a scratch directory (a net may write files: HDF5Output),
with a time limit. Each ends ``ok``, ``error`` (caffepy's one-line error), ``timeout`` or
``traceback`` (a raw Python traceback on stderr: a caffepy defect, whatever the file). Files
whose Python layers need their repository's modules are left out (they run only inside
measure.py's sandbox), and so is the held-out split. ``export`` takes the deploy files with
inputs that build completely, ``draw-shapes`` every file that builds completely (the latest
record of results.json), ``upgrade`` every readable one with a V1 ``layers`` block.

Prints one line per file that does not end ``ok`` or ``error`` (``--all``: every non-ok one)
and the counts per command. ``--limit`` takes the first N of a shuffle (``--seed``).
"""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import census_lib as L  # noqa: E402

COMMANDS = {
    "export": lambda f: ["export", f, "-o", "x.onnx"],
    "draw-shapes": lambda f: ["draw", f, "--shapes", "--json", "x.json", "-o", "x.dot"],
    "upgrade": lambda f: ["upgrade_net_proto_text", f, "x.prototxt"],
}
TRACEBACK = "Traceback (most recent call last)"
V1_BLOCK = re.compile(r"\blayers\s*\{")


def latest_records(results):
    """{sha256: the last record} of the census split in ``results`` (a JSON-lines file)."""
    out = {}
    with open(results) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("split") == "census":
                    out[r["sha256"]] = r
    return out


def wanted(command, record, text):
    """Whether ``command`` runs on the file of ``record`` (its ``text``): see module doc."""
    if "modules" in record:
        return False
    if command == "upgrade":
        return bool(record.get("read")) and V1_BLOCK.search(text) is not None
    if command == "export":
        return bool(record.get("complete")) and bool(record.get("deploy_with_inputs"))
    return bool(record.get("complete"))


def outcome(argv, timeout, cwd):
    """('ok' | 'error' | 'timeout' | 'traceback', the last stderr line)."""
    try:
        p = subprocess.run([sys.executable, "-m", "caffepy"] + argv, capture_output=True,
                           text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if TRACEBACK in p.stderr:
        return "traceback", last
    return ("ok" if p.returncode == 0 else "error"), last


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--results", default=os.path.join(L.DATA, "results.json"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--all", action="store_true", help="print every file that is not ok")
    args = ap.parse_args(argv)
    records = latest_records(args.results)
    shas = sorted(records)
    random.Random(args.seed).shuffle(shas)
    counts = {c: collections.Counter() for c in args.commands.split(",")}
    with tempfile.TemporaryDirectory(prefix="census-commands-") as scratch:
        for command in counts:
            taken = 0
            for sha in shas:
                path = os.path.join(L.CACHE, sha + ".prototxt")
                if not os.path.exists(path):
                    continue
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
                if not wanted(command, records[sha], text):
                    continue
                if args.limit and taken >= args.limit:
                    break
                taken += 1
                end, last = outcome(COMMANDS[command](path), args.timeout, scratch)
                counts[command][end] += 1
                if end in ("traceback", "timeout") or (args.all and end != "ok"):
                    r = records[sha]
                    print("%s %s %s %s: %s" % (command, end, r["repo"], r["path"],
                                               last.replace(path, "FILE")[:240]), flush=True)
    for command, c in counts.items():
        print("%-12s %s" % (command, ", ".join("%s %d" % kv for kv in sorted(c.items()))))
    return 1 if any(c["traceback"] for c in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
