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
the walk never fetches a repository twice. Third-party files stay in the cache, outside the
repository.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import census_lib as L  # noqa: E402

_ZOO = None


def git(mirror, *args, data=None):
    return subprocess.run(["git", "--git-dir=" + mirror] + list(args), input=data,
                          capture_output=True, check=True).stdout


def list_blobs(mirror, commit):
    """[(path, blob sha, size)] of candidate files (by extension, size <= 2 MB) at ``commit``."""
    out = git(mirror, "ls-tree", "-r", "-l", "-z", commit)
    rows = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha, size = meta.split()
        path = path.decode("utf-8", "replace")
        if kind != b"blob" or not L.is_candidate_path(path) or "\t" in path or "\n" in path:
            continue
        if not size.isdigit() or int(size) > L.MAX_BYTES:    # '-', or 'BAD': absent from the
            continue                                         # snapshot (4 MB and more)
        rows.append((path, sha.decode(), int(size)))
    return rows


def read_blobs(mirror, shas):
    """{blob sha: bytes} via one ``git cat-file --batch`` (missing blobs are left out)."""
    if not shas:
        return {}
    out = git(mirror, "cat-file", "--batch", data=("\n".join(shas) + "\n").encode())
    blobs, i = {}, 0
    while i < len(out):
        nl = out.index(b"\n", i)
        header = out[i:nl].split()
        i = nl + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        blobs[header[0].decode()] = out[i:i + size]
        i += size + 1
    return blobs


def net_files(mirror, commit):
    """[(path, bytes)] of the net files at ``commit``, and how many candidates there were."""
    cands = list_blobs(mirror, commit)
    blobs = read_blobs(mirror, sorted({sha for _, sha, _ in cands}))
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
        commit = git(args.mirror, "rev-parse", "HEAD").decode().strip()
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
    L.append_rows(L.MANIFEST, L.MANIFEST_COLUMNS, kept)
    L.append_rows(L.DUPLICATES, L.DUPLICATE_COLUMNS, dups)
    L.append_rows(L.FETCHED, L.FETCHED_COLUMNS, [dict(
        repo=args.repo, commit=commit, net_files=len(nets), kept=len(kept),
        duplicates=len(dups), modelzoo=zoo, status="ok" if nets else "no-net-files")])
    print("%s: %d net files, kept %d, duplicates %d, model-zoo copies %d"
          % (args.repo, len(nets), len(kept), len(dups), zoo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
