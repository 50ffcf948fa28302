"""The census tools' pure functions (tools/census): sampling order, held-out rule, net-file
detection, the per-repository choice, dedupe, tables I/O, the text scan of tables.py; and, when
tools/census/manifest.tsv exists, that it is well formed. No network, no ../shared needed."""
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
