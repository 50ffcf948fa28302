#!/usr/bin/env python3
"""Collect one fetched repository's net files into the census (the file side of the walk).

    python3 tools/census/collect.py --mirror /work/.mirror/owner+name/<git dir> --repo owner/name
    python3 tools/census/collect.py --repo owner/name --status fetch-failed   # nothing fetched

Steps (docs/census.md, "Collection"): list every ``*.prototxt`` / ``*.pt`` blob of HEAD of at most
2 MB; a net file is one whose text has a ``layer {`` / ``layers {`` block; copies (same sha256) of
files of ../shared/modelzoo are dropped first (counted: a fork of Caffe holds dozens of BVLC's
own nets, which the project has already); of the rest keep at most 10, the first 10 by
sha256(repo + ":" + path); then, per chosen file: a copy of a file the census already holds
is a duplicate (duplicates.tsv records it and the repository that kept it), anything else is
stored as <cache>/<sha256>.prototxt and appended to manifest.tsv with its split. One row per
repository goes to fetched.tsv (net files found, kept, duplicates, model-zoo copies, status), so
the walk never fetches a repository twice. When the files chosen (kept or duplicates) name a
``python_param.module``, the repository's ``.py`` files are stored and pymods.tsv gets a row per
module (tools/census/pymods.py). Third-party files stay in the cache, outside the repository.
"""
import argparse
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import census_lib as L  # noqa: E402
import gitio  # noqa: E402
import pymods  # noqa: E402

_ZOO = None


def net_files(mirror, commit):
    """[(path, bytes)] of the net files at ``commit``, and how many candidates there were."""
    cands = [b for b in gitio.ls_tree(mirror, commit, L.is_candidate_path)
             if b[2] is not None and b[2] <= L.MAX_BYTES]
    blobs = gitio.read_blobs(mirror, sorted({sha for _, sha, _ in cands}))
    nets = []
    for path, sha, _ in cands:
        data = blobs.get(sha)
        if data is not None and L.is_net_text(data.decode("utf-8", "replace")):
            nets.append((path, data))
    return nets, len(cands)


def collect(repo, nets, commit, known, zoo, cache):
    """Decide each chosen file's fate; returns (manifest rows, duplicate rows, zoo copies).
    ``known``: {sha256: repo that kept it}, updated in place."""
    shas = {path: L.sha256_hex(data) for path, data in nets}
    by_path = {path: data for path, data in nets if shas[path] not in zoo}
    zoo_copies = len(nets) - len(by_path)
    kept, dups = [], []
    for path in L.choose_files(repo, list(by_path)):
        data, sha = by_path[path], shas[path]
        if sha in known:
            dups.append({"repo": repo, "path": path, "commit": commit, "sha256": sha,
                         "first_repo": known[sha]})
        else:
            known[sha] = repo
            target = L.cache_path(sha, cache)
            if not os.path.exists(target):
                tmp = target + ".tmp"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            kept.append({"repo": repo, "path": path, "commit": commit, "sha256": sha,
                         "split": L.split_of(repo), "bytes": len(data)})
    return kept, dups, zoo_copies


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", required=True, help="owner/name")
    p.add_argument("--mirror", help="the fetched bare git directory")
    p.add_argument("--status", help="record this status without reading a mirror "
                                    "(e.g. fetch-failed, too-big)")
    p.add_argument("--cache", default=L.CACHE)
    args = p.parse_args(argv)
    fetched = L.read_table(L.FETCHED, L.FETCHED_COLUMNS)
    if any(r["repo"] == args.repo for r in fetched):
        print("%s: already in fetched.tsv, skipped" % args.repo)
        return 0
    if args.status or not args.mirror:
        L.append_rows(L.FETCHED, L.FETCHED_COLUMNS, [dict(
            repo=args.repo, commit="", net_files=0, kept=0, duplicates=0, modelzoo=0,
            status=args.status or "fetch-failed")])
        print("%s: %s" % (args.repo, args.status or "fetch-failed"))
        return 0
    os.makedirs(args.cache, exist_ok=True)
    try:
        commit = gitio.git(args.mirror, "rev-parse", "HEAD").decode().strip()
        nets, _ = net_files(args.mirror, commit)
    except (subprocess.CalledProcessError, OSError, ValueError) as e:
        L.append_rows(L.FETCHED, L.FETCHED_COLUMNS, [dict(
            repo=args.repo, commit="", net_files=0, kept=0, duplicates=0, modelzoo=0,
            status="unreadable")])
        print("%s: unreadable mirror (%s)" % (args.repo, str(e).splitlines()[0][:200]))
        return 0
    global _ZOO
    if _ZOO is None:
        _ZOO = L.modelzoo_hashes()
    known = {r["sha256"]: r["repo"] for r in L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)}
    kept, dups, zoo = collect(args.repo, nets, commit, known, _ZOO, args.cache)
    texts = dict(nets)
    mods = pymods.collect_repo(args.repo, commit, args.mirror, [
        (r["path"], texts[r["path"]].decode("utf-8", "replace")) for r in kept + dups])
    L.append_rows(L.MANIFEST, L.MANIFEST_COLUMNS, kept)
    L.append_rows(L.DUPLICATES, L.DUPLICATE_COLUMNS, dups)
    L.append_rows(L.PYMODS, L.PYMOD_COLUMNS, mods)
    L.append_rows(L.FETCHED, L.FETCHED_COLUMNS, [dict(
        repo=args.repo, commit=commit, net_files=len(nets), kept=len(kept),
        duplicates=len(dups), modelzoo=zoo, status="ok" if nets else "no-net-files")])
    print("%s: %d net files, kept %d, duplicates %d, model-zoo copies %d"
          % (args.repo, len(nets), len(kept), len(dups), zoo))
    if mods and not L.is_heldout(args.repo):
        c = collections.Counter(r["status"] for r in mods)
        print("%s: Python layer modules %s" % (args.repo, ", ".join(
            "%s %d" % kv for kv in sorted(c.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
