#!/usr/bin/env python3
"""Build the census frame, and say which repositories to walk next.

The frame is the union of the repositories that the code index's ``find_files(path=P)`` listed for
a fixed list of common Caffe net / solver file paths (tools/census/queries.tsv: the path, the total
``count`` the index reported, and how many rows it listed; frame_raw.tsv: each listed row, the
repository, the first 7 hex digits of the commit it was listed at, and the query). The paths were
chosen by how common the *name* is, never by what the files hold or whether caffepy reads them.

``python3 tools/census/frame.py build`` writes frame.tsv: one row per repository (the first query
in queries.tsv order that listed it), less the repositories the project already used, sorted by
the sampling order key, with the held-out split. ``python3 tools/census/frame.py next N`` prints the
next N repositories of the frame, in order, that fetched.tsv does not list yet (the walk resumes
there). ``python3 tools/census/frame.py stats`` prints the frame's and the walk's sizes.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import census_lib as L  # noqa: E402

RAW = os.path.join(L.HERE, "frame_raw.tsv")
QUERIES = os.path.join(L.HERE, "queries.tsv")


def read_raw(raw=RAW, queries=QUERIES):
    """(queries in order, {repo: (commit, query)} with the first query that listed it)."""
    order = []
    with open(queries, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                order.append(line.rstrip("\n").split("\t")[0])
    rank = {q: i for i, q in enumerate(order)}
    first = {}
    with open(raw, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            repo, commit, query = line.rstrip("\n").split("\t")[:3]
            if repo not in first or rank[query] < rank[first[repo][1]]:
                first[repo] = (commit, query)
    return order, first


def build_frame(first, excluded):
    rows = []
    for repo, (commit, query) in first.items():
        if repo.lower() in excluded:
            continue
        rows.append({"order_key": L.order_key(repo), "repo": repo, "commit": commit,
                     "query": query, "split": L.split_of(repo)})
    rows.sort(key=lambda r: r["order_key"])
    return rows


def next_repos(frame_rows, fetched_rows, n):
    done = {r["repo"] for r in fetched_rows}
    return [r["repo"] for r in frame_rows if r["repo"] not in done][:n]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("build", "next", "stats"))
    p.add_argument("n", nargs="?", type=int, default=10)
    args = p.parse_args(argv)
    if args.what == "build":
        _, first = read_raw()
        excluded = L.excluded_repos()
        rows = build_frame(first, excluded)
        L.write_table(L.FRAME, L.FRAME_COLUMNS, rows)
        print("frame: %d repositories listed, %d excluded, %d in the frame (%d held out)"
              % (len(first), len(first) - len(rows), len(rows),
                 sum(r["split"] == "heldout" for r in rows)))
        return 0
    frame = L.read_table(L.FRAME, L.FRAME_COLUMNS)
    fetched = L.read_table(L.FETCHED, L.FETCHED_COLUMNS)
    if args.what == "next":
        print("\n".join(next_repos(frame, fetched, args.n)))
        return 0
    walked = {r["repo"] for r in fetched}
    in_frame = [r for r in frame if r["repo"] in walked]
    last = max((i for i, r in enumerate(frame) if r["repo"] in walked), default=-1)
    print("frame %d, walked %d (all within the first %d of the order), with net files %d"
          % (len(frame), len(in_frame), last + 1,
             sum(int(r["net_files"]) > 0 for r in fetched)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
