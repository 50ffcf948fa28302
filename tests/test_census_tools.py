"""The census tools' pure functions (tools/census): sampling order, held-out rule, net-file
detection, the per-repository choice, dedupe, tables I/O, the text scan of tables.py, the coverage
curve, measure's plan, sandbox command, forward pass, repository layout and strict pass; and, when
tools/census/manifest.tsv exists, that it is well formed. The Python layer modules' tests are in
tests/test_census_pymods.py. No network, no ../shared needed."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools", "census"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))

import census_lib as L  # noqa: E402
import collect  # noqa: E402
import frame  # noqa: E402
import tables  # noqa: E402


def test_order_key_and_heldout_rule():
    assert L.order_key("a/b") == L.sha256_hex("caffepy-census-1:a/b")
    repos = ["owner%d/repo%d" % (i, i) for i in range(2000)]
    held = [r for r in repos if L.is_heldout(r)]
    assert all(int(L.sha256_hex("caffepy-census-heldout-1:" + r), 16) % 5 == 0 for r in held)
    assert 0.15 < len(held) / len(repos) < 0.25          # a random fifth
    assert L.split_of(held[0]) == "heldout"
    assert L.split_of(next(r for r in repos if r not in held)) == "census"


def test_frame_ordering_and_exclusion():
    first = {"x/one": ("abc1234", "deploy.prototxt"), "BVLC/caffe": ("def", "q"),
             "y/two": ("0000000", "train.prototxt")}
    rows = frame.build_frame(first, {"bvlc/caffe"})
    assert [r["repo"] for r in rows] == sorted(["x/one", "y/two"], key=L.order_key)
    assert all(r["split"] == L.split_of(r["repo"]) for r in rows)
    fetched = [{"repo": rows[0]["repo"]}]
    assert frame.next_repos(rows, fetched, 5) == [rows[1]["repo"]]


def test_net_file_detection():
    assert L.is_net_text('name: "n"\nlayer {\n name: "a" type: "ReLU" }')
    assert L.is_net_text('layers{ type: RELU }')
    assert not L.is_net_text('net: "train.prototxt"\nbase_lr: 0.01\n')           # a solver
    assert not L.is_net_text('# layer { type: "ReLU" }\nbase_lr: 0.1\n')         # commented out
    assert not L.is_net_text('name: "player {"\n')                      # no word boundary
    assert L.is_candidate_path("a/B.PROTOTXT") and L.is_candidate_path("x/test.pt")
    assert not L.is_candidate_path("x/model.caffemodel")


def test_choose_files_is_a_hash_order_cap():
    paths = ["p%d.prototxt" % i for i in range(25)]
    chosen = L.choose_files("o/r", paths, k=10)
    assert len(chosen) == 10
    assert chosen == sorted(paths, key=lambda p: L.sha256_hex("o/r:" + p))[:10]
    assert L.choose_files("o/r", paths[:3]) == sorted(paths[:3],
                                                      key=lambda p: L.sha256_hex("o/r:" + p))


def test_collect_dedupes_and_drops_zoo_copies(tmp_path):
    a, b, zoo = b"layer { type: 'A' }", b"layer { type: 'B' }", b"layer { type: 'Z' }"
    known = {}
    kept, dups, nzoo = collect.collect("o/r1", [("a.prototxt", a), ("b.prototxt", b),
                                                ("z.prototxt", zoo), ("a2.prototxt", a)],
                                       "c1", known, {L.sha256_hex(zoo)}, str(tmp_path))
    assert nzoo == 1
    assert len(kept) == 2 and len(dups) == 1 and dups[0]["first_repo"] == "o/r1"
    assert {r["sha256"] for r in kept} == {L.sha256_hex(a), L.sha256_hex(b)}
    assert (tmp_path / (L.sha256_hex(a) + ".prototxt")).read_bytes() == a
    kept2, dups2, _ = collect.collect("o/r2", [("x.prototxt", b)], "c2", known, set(),
                                      str(tmp_path))
    assert not kept2 and dups2[0]["first_repo"] == "o/r1"      # the first repository keeps it


def test_manifest_round_trip(tmp_path):
    path = str(tmp_path / "m.tsv")
    rows = [{"repo": "o/r", "path": "a b/c.prototxt", "commit": "c" * 40, "sha256": "d" * 64,
             "split": "census", "bytes": 12}]
    L.append_rows(path, L.MANIFEST_COLUMNS, rows)
    L.append_rows(path, L.MANIFEST_COLUMNS, rows)
    back = L.read_table(path, L.MANIFEST_COLUMNS)
    assert len(back) == 2 and back[0]["path"] == "a b/c.prototxt" and back[0]["bytes"] == "12"
    with pytest.raises(ValueError):
        L.append_rows(path, L.MANIFEST_COLUMNS, [dict(rows[0], path="tab\there")])


def test_tables_scan_types_fields_and_python():
    text = '''name: "n"
input: "data"
layer { name: "c" type: "Convolution" convolution_param { num_output: 2 bogus: 3 } }
layer { name: "p" type: "Pooling" pooling_param { pool: WEIRD } }
layer { name: "py" type: "Python" python_param { module: "m" layer: "L" } }
layers { type: CONVOLUTION }
layers { layer { type: "conv" } }
'''
    evs = tables.events(text)
    types = tables.layer_types(evs)
    assert ("Convolution", "current") in types and ("CONVOLUTION", "V1") in types
    assert ("conv", "V0") in types
    assert tables.python_modules(evs) == ["m.L"]
    assert "input" in tables.input_forms(evs, types)


def test_tables_refuse_heldout_rows():
    held = next("o%d/r" % i for i in range(100) if L.is_heldout("o%d/r" % i))
    with pytest.raises(tables.HeldOutError):
        tables.check_census([{"repo": held, "path": "x", "sha256": "0" * 64}])


@pytest.mark.skipif(not os.path.exists(L.MANIFEST), reason="no manifest yet")
def test_manifest_is_well_formed():
    rows = L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)
    shas = [r["sha256"] for r in rows]
    assert len(shas) == len(set(shas))
    for r in rows:
        assert len(r["sha256"]) == 64 and len(r["commit"]) == 40
        assert r["split"] == L.split_of(r["repo"])
        assert int(r["bytes"]) <= L.MAX_BYTES
    per_repo = {}
    for r in rows:
        per_repo[r["repo"]] = per_repo.get(r["repo"], 0) + 1
    assert max(per_repo.values()) <= L.MAX_FILES_PER_REPO
    fetched = {r["repo"] for r in L.read_table(L.FETCHED, L.FETCHED_COLUMNS)}
    assert set(per_repo) <= fetched


def test_measure_plan_and_sandbox(tmp_path):
    import measure
    cache = tmp_path / "files"
    cache.mkdir()
    text = 'layer { type: "Python" python_param { module: "m" layer: "L" } }'
    sha = L.sha256_hex(text)
    (cache / (sha + ".prototxt")).write_text(text)
    row = {"repo": "o/r", "path": "n.prototxt", "sha256": sha, "split": "census"}
    mods = [dict(repo="o/r", commit="c", module="m", path="lib/m.py", sha256="s", root="lib",
                 status="found")]
    py_dir = str(tmp_path / "py")
    todo = measure.plan([row], {}, "T", mods, str(cache), py_dir)
    assert todo == [(row, [os.path.join(py_dir, "o+r", "lib"), os.path.join(py_dir, "o+r")])]
    # a record without modules does not count; one with modules does
    assert measure.plan([row], {(sha, "T"): {"sha256": sha}}, "T", mods, str(cache), py_dir)
    assert not measure.plan([row], {(sha, "T"): {"modules": 2}}, "T", mods, str(cache), py_dir)
    assert not measure.plan([row], {(sha, "T"): {}}, "T", [], str(cache), py_dir)
    res = tmp_path / "results.json"
    res.write_text('{"sha256": "a", "tree": "T", "modules": 1}\n{"sha256": "a", "tree": "T"}\n')
    assert measure.load_results(str(res))[("a", "T")]["modules"] == 1
    cmd = measure.sandbox_argv(str(res), ["--limit", "1"])
    assert cmd[:4] == ["bwrap", "--ro-bind", "/", "/"] and "--unshare-net" in cmd
    assert cmd[cmd.index("--bind") + 1:cmd.index("--bind") + 3] == [str(res)] * 2
    assert cmd.count("--bind") == 1 and cmd[-2:] == ["--limit", "1"]
    saved = list(sys.path)
    try:
        sys.path.insert(0, L.ROOT)
        measure.add_roots(["/r1", "/r2"])
        assert sys.path[:3] == [L.ROOT, "/r1", "/r2"]
    finally:
        sys.path[:] = saved


def test_coverage_curve_counts_files_whose_types_are_all_ranked():
    import curve
    rows = [{"repo": "a/x", "sha256": "1", "kept": True},
            {"repo": "b/y", "sha256": "2", "kept": True},
            {"repo": "c/z", "sha256": "3", "kept": True},
            {"repo": "d/w", "sha256": "1", "kept": False}]
    conv, relu, odd = ("Convolution", "current"), ("ReLU", "current"), ("Odd", "current")
    facts = {"1": {"types": [conv, relu]}, "2": {"types": [conv]}, "3": {"types": [conv, odd]}}
    records = {"1": {"complete": True, "deploy_with_inputs": True, "runnable": True},
               "2": {"complete": True, "deploy_with_inputs": False},
               "3": {"complete": True, "deploy_with_inputs": True, "runnable": False}}
    order, nrepos = curve.ranked_types(rows, facts)
    assert order == [conv, relu, odd] and nrepos == {conv: 4, relu: 2, odd: 1}
    points, (n, nd, tail, _) = curve.curve(rows, facts, records, checkpoints=(1, 2))
    # the duplicate row counts for the ranking, not as a second file
    assert (n, nd, tail) == (3, 2, 3)
    assert points == [(1, 1, 0), (2, 2, 1), (3, 3, 1)]
    text = curve.render(rows, facts, records)
    assert "| 3 | 3 / 3 (100.0%) | 1 / 2 (50.0%) |" in text and "begins at rank 3" in text


def test_measure_forward_batch_one_where_the_net_takes_it(tmp_path):
    import forward
    free = ('input: "x" input_shape { dim: 8 dim: 3 dim: 4 dim: 4 }\n'
            'layer { name: "c" type: "Convolution" bottom: "x" top: "c" '
            'convolution_param { num_output: 2 kernel_size: 3 } }\n')
    fixed = free + ('layer { name: "r" type: "Reshape" bottom: "c" top: "r" '
                    'reshape_param { shape { dim: 8 dim: 8 } } }\n')
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    net = Net(free, caffe_pb2.TEST)
    forward._batch_one(net)
    assert net.blobs["x"].shape == (1, 3, 4, 4) and net.blobs["c"].shape == (1, 2, 2, 2)
    net = Net(fixed, caffe_pb2.TEST)
    forward._batch_one(net)                  # the Reshape writes the batch in: declared shapes
    assert net.blobs["x"].shape == (8, 3, 4, 4) and net.blobs["r"].shape == (8, 8)
    path = tmp_path / "net.prototxt"
    path.write_text(fixed)
    assert forward._forward(str(path)) == 0


def test_measure_forward_runs_in_the_phase_of_the_inputs(tmp_path):
    # inputs only in TRAIN (a net fed from Python while training): run in TRAIN, as summary
    # shows it and as ``caffe time`` does by default; in TEST nothing produces the data
    import forward
    net = ('layer { name: "x" type: "Input" top: "x" include { phase: TRAIN } '
           'input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }\n'
           'layer { name: "c" type: "Convolution" bottom: "x" top: "c" '
           'convolution_param { num_output: 2 kernel_size: 3 } }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(net)
    assert forward._forward(str(path)) == 0                    # in this process: no fork
    assert forward._forward(str(path), phase="TRAIN") == 0
    # a bottom no phase produces stays an error
    path.write_text(net.replace('bottom: "x"', 'bottom: "y"'))
    from caffepy.errors import NetError
    with pytest.raises(NetError, match="unknown bottom blob 'y'"):
        forward._forward(str(path))


def test_measure_a_carried_layer_is_not_complete(tmp_path):
    """summary carries an in-place layer without a class (lenient passes); complete needs the
    strict run, which names the unknown type."""
    import measure
    net = ('input: "x" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
           'layer { name: "c" type: "Convolution" bottom: "x" top: "c" '
           'convolution_param { num_output: 2 kernel_size: 3 } }\n'
           'layer { name: "act" type: "FancyActivation" bottom: "c" top: "c" }\n'
           'layer { name: "p" type: "Pooling" bottom: "c" top: "p" '
           'pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n')
    text = net.encode()
    sha = __import__("hashlib").sha256(text).hexdigest()
    (tmp_path / (sha + ".prototxt")).write_bytes(text)
    row = {"sha256": sha, "repo": "a/b", "path": "net.prototxt", "split": "census"}
    rec = measure.measure_file(row, "T", cache=str(tmp_path))
    assert rec["lenient"] and rec["read"]
    assert not rec["complete"] and rec["failed"] == "complete"
    assert rec["category"] == "unknown_type" and "FancyActivation" in rec["error"]
    assert rec["runnable"] is False          # a deploy file: not run when not complete


def test_measure_lays_each_repository_out_at_its_paths(tmp_path):
    """Each file is measured where its repository has it, its neighbours beside it (links into
    the cache); a path that climbs out keeps the file in the cache."""
    cache = tmp_path / "cache"
    cache.mkdir()
    rows = []
    for repo, path, text in (("a/b", "models/x/train.prototxt", "layer {}\n"),
                             ("a/b", "../evil.prototxt", "layer { }\n"),
                             ("c/d", "deploy.prototxt", "layers {}\n")):
        sha = L.sha256_hex(text.encode())
        (cache / (sha + ".prototxt")).write_text(text)
        rows.append({"repo": repo, "path": path, "sha256": sha})
    dup = {"repo": "a/b", "path": "models/x/deploy.prototxt", "sha256": rows[2]["sha256"]}
    files = L.repository_files(rows, [dup])
    assert files["a/b"] == {"models/x/train.prototxt": rows[0]["sha256"],
                            "../evil.prototxt": rows[1]["sha256"],
                            "models/x/deploy.prototxt": rows[2]["sha256"]}
    trees = L.RepositoryTrees(files, str(tmp_path / "trees"), cache=str(cache))
    where = trees.path_of(rows[0])
    assert where == str(tmp_path / "trees" / "a+b" / "models" / "x" / "train.prototxt")
    assert open(where).read() == "layer {}\n"
    beside = os.path.join(os.path.dirname(where), "deploy.prototxt")
    assert open(beside).read() == "layers {}\n"
    assert trees.path_of(rows[1]) == L.cache_path(rows[1]["sha256"], str(cache))
    assert not (tmp_path / "trees" / "evil.prototxt").exists()
    assert trees.path_of(rows[2]).endswith(os.path.join("c+d", "deploy.prototxt"))


def test_measure_runs_the_strict_pass_after_every_lenient_reading(tmp_path, capfd):
    """The measure makes the strict run only when the lenient run's stderr carries one of its
    marks: each lenient reading of caffepy (dropped fields, text repairs, a singular field given
    twice, data layers' undeclared fields) must print one, or its files would count as complete
    without --strict having run."""
    import measure
    from caffepy import cli
    nets = {
        "dropped": 'layer { name: "c" type: "Convolution" bottom: "x" top: "y" '
                   'convolution_param { num_output: 2 kernel_size: 1 no_such_field: 3 } }',
        "repaired": 'layer { name: "c" type: "Convolution" bottom: "x" top: "y" '
                    'convolution_param { num_output: ${N} kernel_size: 1 } }',
        "twice": 'layer { name: "c" type: "Convolution" bottom: "x" top: "y" '
                 'convolution_param { num_output: 2 kernel_size: 1 bias_term: true '
                 'bias_term: false } }',
        "data_layer": 'layer { name: "d" type: "ImageData" top: "x" top: "l" image_data_param { '
                      'source: "l.txt" batch_size: 1 new_height: 8 new_width: 8 label_dim: 2 } }',
        "no_tops": 'layer { name: "c" type: "Convolution" bottom: "x" top: "y" '
                   'convolution_param { num_output: 2 kernel_size: 1 } }\n'
                   'layer { name: "out" type: "implicit" bottom: "y" }',
    }
    head = 'input: "x" input_shape { dim: 1 dim: 1 dim: 8 dim: 8 }\n'
    for what, body in nets.items():
        path = tmp_path / ("%s.prototxt" % what)
        path.write_text((head if what != "data_layer" else "") + body + "\n")
        assert cli.main(["summary", str(path)]) == 0, what
        err = capfd.readouterr().err
        assert any(mark in err for mark in measure._DIFFERS), (what, err)
        strict_ok = cli.main(["summary", str(path), "--strict"]) == 0
        assert strict_ok == (what == "data_layer"), what   # a reader's fields: structure only
        capfd.readouterr()


def test_commands_count_a_raw_traceback_apart_from_a_one_line_error(tmp_path, monkeypatch):
    import subprocess
    import commands
    v1 = 'layers { name: "ip" type: INNER_PRODUCT bottom: "x" top: "ip" }\n'
    v2 = 'layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" }\n'
    deploy = {"complete": True, "deploy_with_inputs": True, "read": True}
    assert commands.wanted("upgrade", deploy, v1) and not commands.wanted("upgrade", deploy, v2)
    assert commands.wanted("export", deploy, v2)
    assert not commands.wanted("export", dict(deploy, deploy_with_inputs=False), v2)
    assert not commands.wanted("draw-shapes", dict(deploy, modules=1), v2)
    ends = iter([(0, "wrote x\n"), (1, "caffepy export: error: FILE:3: layer 'a': bad\n"),
                 (1, "Traceback (most recent call last):\n  File ...\nKeyError: 'cont'\n")])

    def fake(argv, **kw):
        rc, err = next(ends)
        return subprocess.CompletedProcess(argv, rc, "", err)
    monkeypatch.setattr(commands.subprocess, "run", fake)
    assert [commands.outcome(["export"], 5, str(tmp_path))[0] for _ in range(3)] == \
        ["ok", "error", "traceback"]


def test_mutants_edit_the_text_reproducibly_and_classify_the_ends():
    import random
    import mutants
    text = ('name: "n"\ninput: "data"\ninput_dim: 1\ninput_dim: 3\ninput_dim: 8\ninput_dim: 8\n'
            'layer {\n  name: "c"\n  type: "Convolution"\n  bottom: "data"\n  top: "c"\n'
            '  convolution_param {\n    num_output: 4\n    kernel_size: 3\n  }\n}\n')
    first = [mutants.mutate(text, random.Random(s), ["Pooling", "ReLU"]) for s in range(40)]
    again = [mutants.mutate(text, random.Random(s), ["Pooling", "ReLU"]) for s in range(40)]
    assert first == again                                   # the seed decides every edit
    assert all(1 <= len(edits) <= 3 for _, edits in first)
    changed = [m for m, _ in first if m != text]
    assert len(changed) >= 35
    edits = [e for _, es in first for e in es]
    assert any("dropped" in e for e in edits) and any(" + " in e for e in edits)
    assert any(" type " in e for e in edits)
    assert any(e.split(": ")[-1].split(":")[-1] in mutants.NUMBERS for e in edits)
    assert any('type: "Pooling"' in m or 'type: "ReLU"' in m for m, _ in first)
    assert mutants.ends("timeout", "") == "timeout"
    assert mutants.ends(0, "") == "ok"
    assert mutants.ends(1, "caffepy summary: error: FILE:3: layer 'c': bad\n") == "error"
    assert mutants.ends(70, "Traceback (most recent call last):\nKeyError: 'x'\n") == "traceback"
    assert {"CaffeError", "ProtoError", "NetError", "ShapeError"} <= mutants.caffe_errors()


def test_fork_schemas_collect_and_probe(tmp_path):
    """fork_schemas: a census repository's caffe.proto (and the layer types its sources register)
    in the harvest tool's layout, a path the harvest already has left out; the probe counts a
    file that fails on an undeclared field and reads under that schema."""
    import subprocess
    import fork_schemas as FS
    repo = next("o%d/fork" % i for i in range(100) if L.split_of("o%d/fork" % i) == "census")
    work = tmp_path / "work"
    (work / "src/caffe/proto").mkdir(parents=True)
    (work / "src/caffe/layers").mkdir(parents=True)
    (work / "src/caffe/proto/caffe.proto").write_text(
        'syntax = "proto2";\npackage caffe;\nmessage NetParameter {\n  optional string name = 1;\n'
        '  optional int32 wobble = 4242;\n}\n')
    (work / "other").mkdir()
    (work / "other/caffe.proto").write_text("message NetParameter { }\n")
    (work / "src/caffe/layers/wobble_layer.cpp").write_text("REGISTER_LAYER_CLASS(Wobble);\n")
    mirror = tmp_path / "mirrors" / repo.replace("/", "+") / "repo"

    def run(*args, cwd=None):
        subprocess.run(args, cwd=cwd, check=True, capture_output=True)
    run("git", "init", "-q", str(work))
    run("git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A", cwd=work)
    run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "x", cwd=work)
    run("git", "clone", "-q", "--bare", str(work), str(mirror))
    out = tmp_path / "out"
    held = next("h%d/fork" % i for i in range(100) if L.split_of("h%d/fork" % i) == "heldout")
    assert FS.census_repos([{"repo": repo}, {"repo": held}]) == [repo]
    records = FS.collect([repo], str(out), str(tmp_path / "mirrors"),
                         known={(repo, "other/caffe.proto")})
    assert [r["path"] for r in records] == ["src/caffe/proto/caffe.proto"]
    name = records[0]["file"]
    assert (out / "layer_types" / (name[:-6] + ".txt")).read_text() == "Wobble\n"
    texts = {"a": 'name: "n"\nwobble: 3\nlayer { name: "d" type: "Input" top: "x" '
                  'input_param { shape { dim: 1 } } }\n',
             "b": 'name: "n"\nlayer { name: "d" type: "Input" top: "x" '
                  'input_param { shape { dim: 1 } } }\n'}
    failing, fixed = FS.probe([str(out / "protos" / name)], texts)
    assert failing == {"a"} and fixed == {"a"}
