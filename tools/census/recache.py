#!/usr/bin/env python3
"""Re-create the census cache (/work/census-data/files/<sha256>.prototxt) from fetched mirrors.

The census files are third-party and are not committed; manifest.tsv names each one by
repository, path, commit and sha256. In a later session, fetch the repositories again (the index's
fetch tool puts each in /work/.mirror/owner+name/), then

    python3 tools/census/recache.py                 # every manifest row whose mirror is present
    python3 tools/census/recache.py --repo owner/name
    python3 tools/census/recache.py --missing       # list the repositories still to fetch

Each file is read with ``git show COMMIT:PATH`` and written only when its sha256 matches the
manifest (a mismatch, or a commit the snapshot no longer has, is reported and skipped). The
Python layer modules of the repositories pymods.tsv lists as found are stored again too, by the
rule that collected them (``pymods.collect_repo``: <CENSUS_DATA>/py/owner+name/), and each
module file's sha256 is checked against the table.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import census_lib as L  # noqa: E402
import pymods  # noqa: E402

MIRRORS = "/work/.mirror"


def git_dir(repo, mirrors=MIRRORS):
    top = os.path.join(mirrors, repo.replace("/", "+", 1), "repo")
    if os.path.isdir(os.path.join(top, ".git")):
        return os.path.join(top, ".git")
    return top if os.path.isdir(top) else None


def restore(row, gd, cache=L.CACHE):
    """'ok', 'present', 'mismatch' or 'missing' for one manifest row."""
    target = L.cache_path(row["sha256"], cache)
    if os.path.exists(target):
        with open(target, "rb") as f:
            if L.sha256_hex(f.read()) == row["sha256"]:
                return "present"
    try:
        data = subprocess.run(["git", "--git-dir=" + gd, "show",
                               "%s:%s" % (row["commit"], row["path"])],
                              capture_output=True, check=True).stdout
    except subprocess.CalledProcessError:
        return "missing"
    if L.sha256_hex(data) != row["sha256"]:
        return "mismatch"
    os.makedirs(cache, exist_ok=True)
    with open(target, "wb") as f:
        f.write(data)
    return "ok"


def restore_modules(repo, gd, table, rows=None):
    """'ok' when the repository's Python layer modules are stored again and every module file
    pymods.tsv lists as found has its sha256; else what differs. ``rows``: the repository's
    net files (``pymods.net_rows``), read from the tables when not given."""
    rows = rows if rows is not None else pymods.net_rows(repo)[repo]
    got = pymods.collect_repo(repo, rows[0][1], gd, pymods.cached_nets(rows))
    want = {(r["module"], r["path"], r["sha256"]) for r in table if r["status"] == "found"}
    have = {(r["module"], r["path"], r["sha256"]) for r in got if r["status"] == "found"}
    return "ok" if want <= have else "modules differ: %s" % sorted(want - have)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo")
    p.add_argument("--missing", action="store_true")
    p.add_argument("--cache", default=L.CACHE)
    args = p.parse_args(argv)
    rows = [r for r in L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)
            if not args.repo or r["repo"] == args.repo]
    if args.missing:
        need = sorted({r["repo"] for r in rows
                       if not os.path.exists(L.cache_path(r["sha256"], args.cache))})
        print("\n".join(need))
        return 0
    counts = {}
    for r in rows:
        gd = git_dir(r["repo"])
        state = restore(r, gd, args.cache) if gd else "no mirror"
        counts[state] = counts.get(state, 0) + 1
        if state in ("mismatch", "missing"):
            print("%s: %s %s" % (state, r["repo"], r["path"]))
    print(", ".join("%s %d" % kv for kv in sorted(counts.items())))
    table = [r for r in L.read_table(L.PYMODS, L.PYMOD_COLUMNS)
             if r["status"] == "found" and (not args.repo or r["repo"] == args.repo)]
    modules, nets = {}, pymods.net_rows() if table else {}     # the tables read once
    for repo in sorted({r["repo"] for r in table}):
        gd = git_dir(repo)
        state = restore_modules(repo, gd, [r for r in table if r["repo"] == repo],
                                nets.get(repo, [])) if gd else "no mirror"
        if state.startswith("modules differ"):
            print("%s: %s" % (repo, state))
            state = "modules differ"
        modules[state] = modules.get(state, 0) + 1
    print("Python layer modules (repositories): " +
          ", ".join("%s %d" % kv for kv in sorted(modules.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
