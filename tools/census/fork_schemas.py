#!/usr/bin/env python3
"""The ``caffe.proto`` files of the census split's repositories that the harvest
(``proto/harvest.json``) lacks, and whether they would let failing census files read.

``collect`` takes, from the fetched snapshots (``/work/.mirror/<owner+name>``) of the census
split's repositories only (held-out repositories are never opened), every ``caffe.proto`` at the
snapshot's HEAD that declares ``message LayerParameter`` or ``message NetParameter`` and whose
(repository, path) the harvest's sources do not name, in the layout
``tools/harvest_fork_schemas.py`` reads: ``DIR/protos/<owner__name>[__<sha1 of path, 6>].proto``,
``DIR/sources.jsonl`` ({file, repo, path, commit, sha1}) and ``DIR/layer_types/<file stem>.txt``
(the ``REGISTER_LAYER_CLASS`` / ``REGISTER_LAYER_CREATOR`` names under the proto's
``src/caffe/``).

``probe`` counts, for one split, the files whose last record (over ``--results``, later files
winning) is not complete with category ``no_field`` (a field or enum value no schema declares),
those whose strict reading (``io.read_net(strict=True)``) still fails on an unknown field, and of
those the ones that read past every unknown field with one of ``DIR``'s schemas loaded as a
user schema (``--proto``). It prints counts only (no file, path or field), so it may run on the
held-out split.

    python3 tools/census/fork_schemas.py collect /tmp/census-protos
    python3 tools/census/fork_schemas.py probe /tmp/census-protos --split heldout
"""
import argparse
import hashlib
import json
import logging
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_lib as L  # noqa: E402
import gitio  # noqa: E402

MIRRORS = "/work/.mirror"
HARVEST = os.path.join(L.ROOT, "proto", "harvest.json")
RESULTS = [os.path.join(L.DATA, name) for name in (
    "results.json", "fix10-s0.json", "fix10-s1.json", "fix11-s0.json", "fix11-s1.json",
    "fix12-s0.json", "fix12-s1.json", "fix13-s0.json", "fix13-s1.json", "fix14-s0.json")]
SCHEMA_RE = re.compile(rb"^\s*message\s+(LayerParameter|NetParameter)\b", re.M)
REGISTER_RE = re.compile(r"REGISTER_LAYER_(?:CLASS|CREATOR)\s*\(\s*(\w+)")
UNKNOWN = ("no field named", "has no value named")


def harvested_sources(path=HARVEST):
    with open(path) as f:
        return {(v["repo"], v["path"]) for v in json.load(f)["sources"].values()}


def census_repos(frame_rows):
    """The census split's repositories of the frame (the held-out ones are left out here)."""
    return sorted(r["repo"] for r in frame_rows if L.split_of(r["repo"]) == "census")


def _file_name(repo, path):
    stem = repo.replace("/", "__")
    if path != "src/caffe/proto/caffe.proto":
        stem += "__" + hashlib.sha1(path.encode()).hexdigest()[:6]
    return stem + ".proto"


def collect(repos, out, mirrors=MIRRORS, known=frozenset()):
    """Write the layout of the module doc for ``repos``' snapshots; returns the source records."""
    os.makedirs(os.path.join(out, "protos"), exist_ok=True)
    os.makedirs(os.path.join(out, "layer_types"), exist_ok=True)
    records = []
    for repo in repos:
        mirror = os.path.join(mirrors, repo.replace("/", "+"), "repo")
        if not os.path.isdir(mirror):
            continue
        try:
            commit = gitio.git(mirror, "rev-parse", "HEAD").decode().strip()
        except subprocess.CalledProcessError:     # a snapshot directory without a repository
            continue
        sources = (".proto", ".cpp", ".cu", ".hpp")
        blobs = gitio.ls_tree(mirror, commit, lambda p: p.endswith(sources))
        for path, sha, size in blobs:
            if not path.endswith("caffe.proto") or size is None or (repo, path) in known:
                continue
            data = gitio.read_blobs(mirror, [sha]).get(sha, b"")
            if not SCHEMA_RE.search(data):
                continue
            name = _file_name(repo, path)
            with open(os.path.join(out, "protos", name), "wb") as f:
                f.write(data)
            schema_dir = path.endswith("src/caffe/proto/caffe.proto")
            prefix = path[:-len("proto/caffe.proto")] if schema_dir else None
            layer_sources = [s for p, s, n in blobs if prefix is not None and n
                             and p.startswith(prefix) and not p.endswith(".proto")]
            types = set()
            for text in gitio.read_blobs(mirror, layer_sources).values():     # one git process
                types.update(REGISTER_RE.findall(text.decode("utf-8", "replace")))
            with open(os.path.join(out, "layer_types", name[:-len(".proto")] + ".txt"), "w") as f:
                f.write("".join(t + "\n" for t in sorted(types)))
            records.append({"file": name, "repo": repo, "path": path, "commit": commit,
                            "sha1": hashlib.sha1(data).hexdigest()})
    with open(os.path.join(out, "sources.jsonl"), "w") as f:
        f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return records


def last_records(paths):
    records = {}
    for path in paths:
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        records[r["sha256"]] = r
    return records


def _fails_on_unknown(text):
    """True when the strict reading fails on an unknown field or value, False when it fails
    otherwise, None when it reads."""
    from caffepy.proto import io
    try:
        io.read_net(text, strict=True)
    except Exception as e:
        return any(u in str(e) for u in UNKNOWN)
    return None


def probe(protos, texts):
    """(files failing on an unknown field, files reading past every unknown field under one of
    ``protos``) over ``texts`` ({key: net text})."""
    from caffepy.proto import user_schema
    failing = {k for k, t in texts.items() if _fails_on_unknown(t)}
    fixed = set()
    for proto in protos:
        try:
            with user_schema.using(proto):
                fixed.update(k for k in failing - fixed if _fails_on_unknown(texts[k]) is not True)
        except Exception:           # a schema protoc refuses: it reads nothing
            pass
        user_schema.reset()
    return failing, fixed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("out")
    c.add_argument("--mirrors", default=MIRRORS)
    p = sub.add_parser("probe")
    p.add_argument("dir")
    p.add_argument("--split", choices=("census", "heldout"), default="heldout")
    p.add_argument("--results", action="append", help="records files, later ones winning "
                   "(default: the census measurements named in docs/census.md)")
    args = ap.parse_args(argv)
    logging.disable(logging.CRITICAL)
    if args.cmd == "collect":
        rows = L.read_table(os.path.join(HERE, "frame.tsv"),
                            ("order_key", "repo", "commit", "query", "split"))
        records = collect(census_repos(rows), args.out, args.mirrors, harvested_sources())
        print("%d schemas (%d distinct) from %d repositories" % (
            len(records), len({r["sha1"] for r in records}), len({r["repo"] for r in records})))
        return 0
    records = last_records(args.results or RESULTS)
    keys = [k for k, r in records.items() if r["split"] == args.split and not r.get("complete")
            and r.get("category") == "no_field"]
    texts = {}
    for k in keys:
        with open(L.cache_path(k), encoding="utf-8", errors="replace") as f:
            texts[k] = f.read()
    protos = sorted(os.path.join(args.dir, "protos", n)
                    for n in os.listdir(os.path.join(args.dir, "protos")))
    failing, fixed = probe(protos, texts)
    print("%s: %d files not complete on an undeclared field; %d fail on one when read strictly; "
          "%d of those read past every one under one of %d schemas (%d repositories)"
          % (args.split, len(keys), len(failing), len(fixed), len(protos),
             len({records[k]["repo"] for k in fixed})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
