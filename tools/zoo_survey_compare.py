#!/usr/bin/env python3
"""Per-repository before / after table of two survey runs of tools/zoo_survey.py (Markdown).

Usage::

    python tools/zoo_survey_compare.py tools/survey/before.json tools/survey/after.json

Columns: files, files that build before and after (``caffepy summary``, strict, the TEST phase
then TRAIN as a user retries), and the files whose Python data layer is absent and whose shapes
cannot be inferred (counted apart, after). The totals give all files, the files less those, and
the deploy files that declare their inputs.
"""
import argparse
import collections
import json


def _by_path(data):
    return {(f["repo"], f["path"]): f for f in data["files"]}


def _pct(a, b):
    return "%d / %d (%.1f%%)" % (a, b, 100.0 * a / b) if b else "0 / 0"


def compare(before, after):
    b, a = _by_path(before), _by_path(after)
    repos = collections.OrderedDict()
    for key in sorted(a, key=lambda k: (k[0].lower(), k[1])):
        repos.setdefault(key[0], []).append(key)
    commits = {f["repo"]: f.get("commit", "")[:12] for f in after["files"]}
    lines = ["| repository (commit) | files | before | after | Python data (apart) |",
             "|---|---|---|---|---|"]
    for repo, keys in repos.items():
        nb = sum(1 for k in keys if k in b and b[k]["ok"])
        na = sum(1 for k in keys if a[k]["ok"])
        py = sum(1 for k in keys if a[k]["category"] == "python_data")
        lines.append("| %s (%s) | %d | %d | %d | %d |" % (repo, commits.get(repo, ""), len(keys),
                                                         nb, na, py))
    lines.append("")
    for name, data in (("before", b), ("after", a)):
        files = list(data.values())
        py = [f for f in files if f["category"] == "python_data"]
        ok = sum(1 for f in files if f["ok"])
        dep = [f for f in files if f.get("deploy_with_inputs")]
        lines.append("- %s: all files %s; less Python data layers %s; deploy files with inputs %s"
                     % (name, _pct(ok, len(files)), _pct(ok, len(files) - len(py)),
                        _pct(sum(1 for f in dep if f["ok"]), len(dep))))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    args = p.parse_args(argv)
    with open(args.before) as f:
        before = json.load(f)
    with open(args.after) as f:
        after = json.load(f)
    print(compare(before, after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
