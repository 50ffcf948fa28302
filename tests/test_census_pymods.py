"""The census tools' Python layer modules (tools/census/pymods.py, recache.py): which modules a
net file names, the location rule that finds their files, the size limits, their collection from a
repository with the table round trip, their restoring from a mirror; and, when the pymods table
exists, that it is well formed. No network, no ../shared needed."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools", "census"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))

import census_lib as L  # noqa: E402
import pymods  # noqa: E402


def test_modules_named_reads_python_param_only():
    text = '''layer { type: "Python" python_param { module: "a.b" layer: "L"
                                            param_str: "{'module': 'x'}" } }
# layer { python_param { module: "commented" } }
layer { type: "Python" python_param { module: 'c' layer: "M" } }
layer { type: "Python" python_param { module: "a.b" layer: "N" } }
'''
    assert pymods.modules_named(text) == ["a.b", "c"]


def test_module_location_rule():
    py = ["lib/a/b/c.py", "x/a/b/c/__init__.py", "a/b/c.py", "models/deep/a/b/c.py",
          "models/other/a/b/c.py", "c.py", "layers/data_layer.py", "tools/data_layer.py",
          "layers/sub/data_layer.py", "aa/b/c.py"]
    # dotted name: the file at <root>/a/b/c.py or <root>/a/b/c/__init__.py, root is the rest
    assert set(pymods.candidates("a.b.c", py)) == {
        ("lib/a/b/c.py", "lib"), ("x/a/b/c/__init__.py", "x"), ("a/b/c.py", ""),
        ("models/deep/a/b/c.py", "models/deep"), ("models/other/a/b/c.py", "models/other")}
    # the nearest directory to the net file wins
    assert pymods.locate("a.b.c", "models/deep/net/train.prototxt", py) == \
        ("models/deep/a/b/c.py", "models/deep")
    assert pymods.locate("a.b.c", "x/train.prototxt", py) == ("x/a/b/c/__init__.py", "x")
    # no shared directory: the shortest path
    assert pymods.locate("a.b.c", "train.prototxt", py) == ("a/b/c.py", "")
    assert pymods.locate("data_layer", "nets/deploy.prototxt", py) == \
        ("tools/data_layer.py", "tools")                 # fewest components, then characters
    assert pymods.locate("data_layer", "layers/deploy.prototxt", py) == \
        ("layers/data_layer.py", "layers")
    assert pymods.locate("data_layer", "layers/sub/deploy.prototxt", py) == \
        ("layers/sub/data_layer.py", "layers/sub")
    assert pymods.locate("c", "train.prototxt", py) == ("c.py", "")
    assert pymods.locate("c", "a/train.prototxt", py) == ("a/b/c.py", "a/b")   # nearer, deeper
    assert pymods.locate("nosuch", "train.prototxt", py) is None
    assert pymods.locate("not a module", "train.prototxt", ["not a module.py"]) is None


def test_select_py_limits(monkeypatch):
    monkeypatch.setattr(L, "MAX_PY_FILES", 3)
    monkeypatch.setattr(L, "MAX_PY_TOTAL", 250)
    blobs = [("deep/x/m.py", "s1", 50), ("a.py", "s2", 100), ("b.py", "s3", 100),
             ("big.py", "s4", L.MAX_PY_BYTES + 1), ("gone.py", "s5", None),
             ("../up.py", "s6", 1), ("c/d.py", "s7", 10), ("e.py", "s8", 90)]
    chosen = pymods.select_py(blobs, first={"deep/x/m.py"})
    # the module's file first, then by depth and path; too big / absent / past the total skipped
    assert [c[0] for c in chosen] == ["deep/x/m.py", "a.py", "b.py"]
    monkeypatch.setattr(L, "MAX_PY_FILES", 10)
    chosen = pymods.select_py(blobs)
    assert [c[0] for c in chosen] == ["a.py", "b.py", "c/d.py"]


def _git_repo(tmp_path, files):
    import subprocess
    work = tmp_path / "work"
    for path, data in files.items():
        f = work / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(work)] + cmd, check=True, env=env, capture_output=True)
    commit = subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    return str(work / ".git"), commit


def test_collect_repo_stores_modules_and_table_round_trip(tmp_path):
    net = b'layer { type: "Python" python_param { module: "pylayers.data" layer: "D" } }\n' \
          b'layer { type: "Python" python_param { module: "missing" layer: "M" } }\n'
    gd, commit = _git_repo(tmp_path, {
        "models/train.prototxt": net, "pylayers/__init__.py": b"",
        "pylayers/data.py": b"import caffe\n", "old/pylayers/data.py": b"# old\n",
        "tools/big.py": b"#" * (L.MAX_PY_BYTES + 1), "README.md": b"x"})
    py_dir = str(tmp_path / "py")
    rows = pymods.collect_repo("o/r", commit, gd, [("models/train.prototxt", net.decode())],
                               py_dir)
    by = {r["module"]: r for r in rows}
    assert by["pylayers.data"]["path"] == "pylayers/data.py"
    assert by["pylayers.data"]["root"] == "" and by["pylayers.data"]["status"] == "found"
    assert by["pylayers.data"]["sha256"] == L.sha256_hex(b"import caffe\n")
    assert by["missing"]["status"] == "not-found" and by["missing"]["path"] == ""
    top = tmp_path / "py" / "o+r"
    assert (top / "pylayers" / "data.py").read_bytes() == b"import caffe\n"
    assert (top / "old" / "pylayers" / "data.py").exists()
    assert not (top / "tools" / "big.py").exists() and not (top / "README.md").exists()
    assert pymods.collect_repo("o/r", commit, gd, [("a.prototxt", "layer { }")], py_dir) == []
    # the table round trip, and the directories measure puts on sys.path
    path = str(tmp_path / "pymods.tsv")
    L.append_rows(path, L.PYMOD_COLUMNS, rows)
    back = L.read_table(path, L.PYMOD_COLUMNS)
    assert back == [{k: str(v) for k, v in r.items()} for r in rows]
    assert pymods.roots_for("o/r", "models/train.prototxt", net.decode(), back, py_dir) == \
        [str(top)]
    assert pymods.roots_for("o/r", "x.prototxt", 'python_param { module: "missing" }', back,
                            py_dir) == []
    assert pymods.stats(back)[L.split_of("o/r")]["found"] == 1


def test_recache_restores_net_files_and_modules_from_a_mirror(tmp_path, monkeypatch):
    import recache
    net = b'layer { type: "Python" python_param { module: "pylayers.data" layer: "D" } }\n'
    gd, commit = _git_repo(tmp_path, {"models/train.prototxt": net,
                                      "pylayers/data.py": b"import caffe\n"})
    row = dict(repo="o/r", path="models/train.prototxt", commit=commit,
               sha256=L.sha256_hex(net), split="census", bytes=str(len(net)))
    cache, manifest = tmp_path / "files", tmp_path / "manifest.tsv"
    L.append_rows(str(manifest), L.MANIFEST_COLUMNS, [row])
    monkeypatch.setattr(L, "MANIFEST", str(manifest))
    monkeypatch.setattr(L, "DUPLICATES", str(tmp_path / "none.tsv"))
    monkeypatch.setattr(L, "CACHE", str(cache))
    monkeypatch.setattr(L, "PY_DIR", str(tmp_path / "py"))
    assert recache.restore(row, gd, str(cache)) == "ok"
    assert recache.restore(row, gd, str(cache)) == "present"
    assert (cache / (row["sha256"] + ".prototxt")).read_bytes() == net
    assert recache.restore(dict(row, sha256="0" * 64), gd, str(cache)) == "mismatch"
    assert recache.restore(dict(row, path="absent.prototxt", sha256="2" * 64), gd,
                           str(cache)) == "missing"
    table = [dict(repo="o/r", commit=commit, module="pylayers.data", path="pylayers/data.py",
                  sha256=L.sha256_hex(b"import caffe\n"), root="", status="found")]
    assert recache.restore_modules("o/r", gd, table) == "ok"
    assert (tmp_path / "py" / "o+r" / "pylayers" / "data.py").read_bytes() == b"import caffe\n"
    assert recache.restore_modules("o/r", gd, [dict(table[0], sha256="1" * 64)]).startswith(
        "modules differ")


@pytest.mark.skipif(not os.path.exists(L.PYMODS), reason="no pymods table yet")
def test_pymods_table_is_well_formed():
    rows = L.read_table(L.PYMODS, L.PYMOD_COLUMNS)
    fetched = {r["repo"]: r["commit"] for r in L.read_table(L.FETCHED, L.FETCHED_COLUMNS)}
    statuses = {"found", "over-limit", "not-found", "no-commit", "not-fetched"}
    for r in rows:
        assert r["status"] in statuses and r["repo"] in fetched
        assert len(r["commit"]) == 40
        assert bool(r["path"]) == (r["status"] in ("found", "over-limit"))
        if r["status"] == "found":
            assert len(r["sha256"]) == 64
            assert pymods.candidates(r["module"], [r["path"]]) == [(r["path"], r["root"])]


def test_init_paths_directories_are_read_not_run(tmp_path):
    top = tmp_path / "py" / "o+r"
    for d in ("tools", "lib", "layers", "fork/python/caffe", "tools/sub"):
        (top / d).mkdir(parents=True)
    (top / "fork" / "python" / "caffe" / "__init__.py").write_text("")
    (top / "tools" / "_init_paths.py").write_text(
        "import os.path as osp, sys\n"
        "raise SystemExit('never run')\n"
        "this_dir = osp.dirname(__file__)\n"
        "sys.path.insert(0, osp.join(this_dir, '..', 'lib'))\n"
        "sys.path.insert(0, osp.join(this_dir, '..', 'fork', 'python'))   # a pycaffe\n"
        "sys.path.insert(0, osp.join(this_dir, '..', '..', '..'))          # outside\n"
        "sys.path.insert(0, osp.join(this_dir, '..', 'absent'))\n"
        "sys.path.insert(0, osp.join(this_dir, name))                     # not a literal\n"
        "sys.path.insert(0, osp.join(this_dir, 'sub'))\n")
    (top / "_init_paths.py").write_text("import os\nadd(os.path.join(here, 'layers'))\n")
    (top / "lib" / "_init_paths.py").write_text("this is not python (\n")
    assert pymods.init_paths_dirs(str(top)) == [
        str(top / "layers"), str(top / "lib"), str(top / "tools" / "sub")]
    rows = [{"repo": "o/r", "status": "found", "module": "m", "path": "layers/m.py",
             "root": "layers"}]
    net = 'python_param { module: "m" }'
    assert pymods.roots_for("o/r", "a.prototxt", net, rows, str(tmp_path / "py")) == [
        str(top / "layers"), str(top), str(top / "lib"), str(top / "tools" / "sub")]
    assert pymods.roots_for("o/r", "a.prototxt", 'python_param { module: "x" }', rows,
                            str(tmp_path / "py")) == []
