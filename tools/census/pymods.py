#!/usr/bin/env python3
"""The Python layer modules of the census repositories (docs/census.md, "Python layer modules").

A user runs a net with Python layers beside its repository's modules, so a repository whose net
files (those it keeps and its duplicates of files kept earlier) name a ``python_param.module``
keeps its ``*.py`` files too: stored as <CENSUS_DATA>/py/<owner+name>/<path as in the repository>
(outside this repository), each at most 256 KB, at most 2,000 files and 8 MB in all (the files
found for the modules first, then the rest, shallowest path first). ``pymods.tsv`` gets one row
per module and file found for it: repo, commit, module, path of the file (empty when none), its
sha256, root (the sys.path entry that imports it under that name) and status:

* ``found``: found and stored;
* ``over-limit``: found but not stored (over 256 KB, absent from the snapshot, past the limits);
* ``not-found``: no ``.py`` file of the repository has the module's name;
* ``no-commit``: the snapshot fetched again lacks the commit the manifest names;
* ``not-fetched``: the repository could not be fetched again.

Module ``a.b.c`` is ``<root>/a/b/c.py`` or ``<root>/a/b/c/__init__.py``; of several, the one whose
directory shares the most leading path components with the net file that names it, then the one
of fewest components, then of fewest characters, then the first in code-point order.

``collect.py`` does this for each repository it walks. For repositories walked before:

    python3 tools/census/pymods.py todo                 # walked, naming modules, not in the table
    python3 tools/census/pymods.py add owner/name ...   # after fetching them; deletes the mirrors
    python3 tools/census/pymods.py stats                # modules found / not found, per split
"""
import argparse
import collections
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_lib as L  # noqa: E402
import gitio  # noqa: E402
from tables import events  # noqa: E402

MIRRORS = "/work/.mirror"
MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def modules_named(text):
    """The ``python_param.module`` values of a net's text, in order, each once."""
    out = []
    for e in events(text):
        if e[0] == "val" and e[1] and e[1][-1] == "python_param" and e[2] == "module":
            if e[3] not in out:
                out.append(e[3])
    return out


def _parts(path):
    return [p for p in path.split("/") if p]


def _shared(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def candidates(module, py_paths):
    """[(path, root)] of the files that import as ``module`` from some root."""
    parts = module.split(".")
    out = []
    for suffix in ("/".join(parts) + ".py", "/".join(parts + ["__init__.py"])):
        for p in py_paths:
            if p == suffix or p.endswith("/" + suffix):
                out.append((p, p[:len(p) - len(suffix)].rstrip("/")))
    return out


def nearest(cands, net_path):
    """The candidate (path, root) the rule picks for the net file at ``net_path``."""
    net_dir = _parts(net_path)[:-1]

    def key(c):
        parts = _parts(c[0])
        return (-_shared(parts[:-1], net_dir), len(parts), len(c[0]), c[0])
    return min(cands, key=key) if cands else None


def locate(module, net_path, py_paths):
    """(path, root) of the file ``module`` imports from, for the net at ``net_path``; or None."""
    if not MODULE_RE.match(module):
        return None
    return nearest(candidates(module, py_paths), net_path)


def select_py(blobs, first=()):
    """The (path, sha, size) of ``blobs`` to store: those in ``first`` (the modules' files), then
    the rest by depth and path, each at most MAX_PY_BYTES, at most MAX_PY_FILES and
    MAX_PY_TOTAL bytes in all; a file that does not fit is passed over."""
    first = set(first)
    order = sorted(blobs, key=lambda b: (b[0] not in first, len(_parts(b[0])), b[0]))
    out, total = [], 0
    for path, sha, size in order:
        if len(out) >= L.MAX_PY_FILES:
            break
        if size is None or size > L.MAX_PY_BYTES or total + size > L.MAX_PY_TOTAL:
            continue
        if ".." in _parts(path) or path.startswith("/"):
            continue
        out.append((path, sha, size))
        total += size
    return out


def repo_dir(repo, py_dir=None):
    return os.path.join(py_dir or L.PY_DIR, repo.replace("/", "+", 1))


def module_rows(repo, commit, named, blobs, stored, data):
    """pymods.tsv rows: ``named`` [(module, net path)], ``blobs`` every .py (path, sha, size),
    ``stored`` the paths stored, ``data`` {path: bytes} of the modules' files."""
    py_paths = [b[0] for b in blobs]
    rows = {}
    for module, net_path in named:
        hit = locate(module, net_path, py_paths)
        path, root = hit if hit else ("", "")
        if (module, path) in rows:
            continue
        status = "not-found" if not hit else "found" if path in stored else "over-limit"
        sha = L.sha256_hex(data[path]) if path in data else ""
        rows[(module, path)] = dict(repo=repo, commit=commit, module=_clean(module), path=path,
                                    sha256=sha, root=root, status=status)
    return list(rows.values())


def _clean(module):
    return " ".join(module.split()) or "?"


def collect_repo(repo, commit, mirror, nets, py_dir=None):
    """Store the repository's .py files when any of ``nets`` [(path, text)] names a module;
    returns its pymods.tsv rows ([] when none is named)."""
    named = [(m, path) for path, text in nets for m in modules_named(text)]
    if not named:
        return []
    blobs = gitio.ls_tree(mirror, commit, lambda p: p.endswith(".py"))
    py_paths = [b[0] for b in blobs]
    found = {h[0] for h in (locate(m, p, py_paths) for m, p in named) if h}
    chosen = select_py(blobs, found)
    contents = gitio.read_blobs(mirror, sorted({sha for _, sha, _ in chosen}))
    top = repo_dir(repo, py_dir)
    if os.path.isdir(top):
        shutil.rmtree(top)
    stored, data = set(), {}
    for path, sha, _ in chosen:
        if sha not in contents:
            continue
        target = os.path.join(top, *_parts(path))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(contents[sha])
        stored.add(path)
        if path in found:
            data[path] = contents[sha]
    return module_rows(repo, commit, named, blobs, stored, data)


def roots_for(repo, net_path, text, rows, py_dir=None):
    """The directories to put on sys.path for a net file of ``repo``: the stored root of each
    module it names (rows: pymods.tsv rows), by the same rule that found it, then the
    repository's top directory (where its scripts run from, for the modules' own imports), then
    the directories its stored ``_init_paths.py`` files add (``init_paths_dirs``: the scripts of
    py-faster-rcnn's lineage import that file first); [] when none of its modules was found."""
    found = [r for r in rows if r["repo"] == repo and r["status"] == "found"]
    top = repo_dir(repo, py_dir)
    out = []
    for module in modules_named(text):
        hit = nearest([(r["path"], r["root"]) for r in found if r["module"] == module], net_path)
        if hit:
            d = os.path.join(top, *_parts(hit[1]))
            if d not in out:
                out.append(d)
    if out:
        out += [d for d in [top] + init_paths_dirs(top) if d not in out]
    return out


INIT_PATHS = "_init_paths.py"
JOINS = ("join",)


def init_paths_dirs(top):
    """The directories that the ``_init_paths.py`` files stored under ``top`` add to sys.path,
    read from their text, never run: each ``os.path.join(<a name>, 'a', '..', 'b')`` whose other
    arguments are all string literals, taken from that file's directory; only directories
    inside ``top`` that exist there and do not hold a ``caffe`` package (a fork's pycaffe, which
    caffepy's ``caffe`` stands for); in order of the files' paths, each directory once."""
    import ast
    files = []
    for d, subdirs, names in os.walk(top):
        subdirs.sort()
        files += [os.path.join(d, INIT_PATHS)] if INIT_PATHS in names else []
    top_real, out = os.path.realpath(top), []
    for path in sorted(files):
        try:
            with open(path, "rb") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            continue
        here = os.path.dirname(path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in JOINS and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Name)):
                continue
            rest = node.args[1:]
            if not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in rest):
                continue
            d = os.path.realpath(os.path.join(here, *[a.value for a in rest]))
            inside = d == top_real or d.startswith(top_real + os.sep)
            d = os.path.normpath(os.path.join(top, os.path.relpath(d, top_real)))
            if (inside and os.path.isdir(d) and d not in out
                    and not os.path.exists(os.path.join(d, "caffe", "__init__.py"))):
                out.append(d)
    return out


# ---------------------------------------------------------------- repositories walked before

def net_rows(repo=None):
    """{repo: [(path, commit, sha256)]} of the kept files and duplicates (the walk's record)."""
    out = collections.defaultdict(list)
    for table, cols in ((L.MANIFEST, L.MANIFEST_COLUMNS), (L.DUPLICATES, L.DUPLICATE_COLUMNS)):
        for r in L.read_table(table, cols):
            if repo is None or r["repo"] == repo:
                out[r["repo"]].append((r["path"], r["commit"], r["sha256"]))
    return out


def cached_nets(rows, cache=None):
    """[(path, text)] of those rows whose file is in the cache."""
    out = []
    for path, _, sha in rows:
        f = L.cache_path(sha, cache)
        if os.path.exists(f):
            with open(f, "rb") as fh:
                out.append((path, fh.read().decode("utf-8", "replace")))
    return out


def todo():
    """Walked repositories (status ok) whose kept files or duplicates name a module and that
    pymods.tsv does not list yet, in sampling order."""
    walked = {r["repo"] for r in L.read_table(L.FETCHED, L.FETCHED_COLUMNS) if r["status"] == "ok"}
    done = {r["repo"] for r in L.read_table(L.PYMODS, L.PYMOD_COLUMNS)}
    out = []
    for repo, rows in net_rows().items():
        if repo in walked and repo not in done and \
                any(modules_named(t) for _, t in cached_nets(rows)):
            out.append(repo)
    return sorted(out, key=L.order_key)


def git_dir(repo, mirrors=MIRRORS):
    top = os.path.join(mirrors, repo.replace("/", "+", 1), "repo")
    if os.path.isdir(os.path.join(top, ".git")):
        return os.path.join(top, ".git")
    return top if os.path.isdir(top) else None


def add(repo, mirrors=MIRRORS):
    """Collect one repository walked before from its fetched mirror at the manifest's commit
    (rows whose status says why not, when it cannot); deletes the mirror."""
    rows = net_rows(repo)[repo]
    commit = rows[0][1]
    nets = cached_nets(rows)
    gd = git_dir(repo, mirrors)
    status = "not-fetched" if gd is None else "" if gitio.has_commit(gd, commit) else "no-commit"
    if status:
        out = [dict(repo=repo, commit=commit, module=_clean(m), path="", sha256="", root="",
                    status=status) for m in dict.fromkeys(m for _, t in nets
                                                            for m in modules_named(t))]
    else:
        out = collect_repo(repo, commit, gd, nets)
    top = os.path.join(mirrors, repo.replace("/", "+", 1))
    if os.path.isdir(top):
        shutil.rmtree(top)
    return out


def stats(rows):
    """{split: Counter of statuses (and repositories)} of pymods.tsv rows."""
    out = {}
    for split in ("census", "heldout"):
        rs = [r for r in rows if L.split_of(r["repo"]) == split]
        c = collections.Counter(r["status"] for r in rs)
        c["repositories"] = len({r["repo"] for r in rs})
        out[split] = c
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("todo", "add", "stats"))
    p.add_argument("repos", nargs="*")
    args = p.parse_args(argv)
    if args.what == "todo":
        repos = todo()
        print("\n".join(repos))
        print("%d repositories (%d held out)" % (len(repos), sum(map(L.is_heldout, repos))),
              file=sys.stderr)
    elif args.what == "add":
        done = {r["repo"] for r in L.read_table(L.PYMODS, L.PYMOD_COLUMNS)}
        for repo in args.repos:
            if repo in done:
                print("%s: already in pymods.tsv, skipped" % repo)
                continue
            rows = add(repo)
            L.append_rows(L.PYMODS, L.PYMOD_COLUMNS, rows)
            if L.is_heldout(repo):
                print("held-out repository: done")
            else:
                c = collections.Counter(r["status"] for r in rows)
                print("%s: %s" % (repo, ", ".join("%s %d" % kv for kv in sorted(c.items()))))
    else:
        for split, c in stats(L.read_table(L.PYMODS, L.PYMOD_COLUMNS)).items():
            print("%s: %s" % (split, ", ".join("%s %d" % kv for kv in sorted(c.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
