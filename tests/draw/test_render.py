import importlib

import pytest

import caffepy.draw as draw
from caffepy.cli import main
from caffepy.draw.render import dot_quote, to_dot
from caffepy.errors import CaffeError
from tests.draw.helpers import needs_engine, png_size, svg_texts

render_mod = importlib.import_module("caffepy.draw.render")

NASTY = ['say "hi"', "a:b:c", "back\\slash", "two\nlines", "end\\", 'q\\"mix']


def _nasty_net():
    layers = ['layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 } } }']
    bottom = "x"
    for i, name in enumerate(NASTY):
        esc = name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        layers.append('layer { name: "%s" type: "ReLU" bottom: "%s" top: "t%d" }' % (esc, bottom, i))
        bottom = "t%d" % i
    return 'name: "we\\"ird:net"\n' + "\n".join(layers)


def test_dot_quote():
    assert dot_quote('a"b') == r'"a\"b"'
    assert dot_quote("a\\b") == r'"a\\b"'
    assert dot_quote("a\nb") == r'"a\nb"'
    assert dot_quote("a\\nb") == r'"a\\nb"'             # a literal backslash-n stays literal
    assert dot_quote("x\r\ny\tz") == r'"x\ny z"'
    assert dot_quote("a:b") == '"a:b"'


def test_nasty_names_in_dot():
    dot = draw.get_dot(_nasty_net())
    assert dot.startswith('digraph "we\\"ird:net" {')
    for name in NASTY:
        assert dot_quote(name)[1:-1] in dot


def test_nasty_names_render():
    needs_engine()
    texts = svg_texts(draw.draw_net(_nasty_net(), "TB", ext="svg"))
    for name in NASTY:
        for line in name.split("\n"):
            assert line in texts, (line, sorted(texts))


def test_no_engine_error(monkeypatch):
    monkeypatch.setattr(render_mod, "find_engine", lambda: None)
    dot = to_dot(draw.net_json(_nasty_net()))
    assert render_mod.render(dot, "dot") == dot.encode()
    with pytest.raises(CaffeError) as e:
        render_mod.render(dot, "png")
    msg = str(e.value)
    assert "\n" not in msg and "pygraphviz" in msg and "apt-get install graphviz" in msg


def test_no_engine_cli(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(render_mod, "find_engine", lambda: None)
    net = tmp_path / "n.prototxt"
    net.write_text(_nasty_net())
    assert main(["draw", str(net), "-o", str(tmp_path / "n.dot")]) == 0
    assert (tmp_path / "n.dot").read_text().startswith("digraph")
    assert main(["draw", str(net), "-o", str(tmp_path / "n.png")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("caffepy draw: error: cannot render .png") and "\n" not in err
    assert not (tmp_path / "n.png").exists()


def test_cli_errors(tmp_path, capsys):
    net = tmp_path / "n.prototxt"
    net.write_text(_nasty_net())
    assert main(["draw", str(net), "-o", str(tmp_path / "n.jpg")]) == 1
    assert "unknown output format '.jpg'" in capsys.readouterr().err
    assert main(["draw", str(tmp_path / "none.prototxt"), "-o", str(tmp_path / "n.dot")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["draw", str(net)]) == 1
    assert "nothing to do" in capsys.readouterr().err
    assert main(["draw", str(net), "-o", str(tmp_path / "n.dot"), "--group-by", "worker"]) == 1
    assert "worker_group" in capsys.readouterr().err


def test_cli_json_then_draw_from_json(tmp_path):
    net = tmp_path / "n.prototxt"
    net.write_text(_nasty_net())
    js, dot = tmp_path / "n.json", tmp_path / "n.dot"
    assert main(["draw", str(net), "--json", str(js)]) == 0
    assert main(["draw", str(js), "-o", str(dot), "-rankdir", "BT", "--display_lrm"]) == 0
    assert 'rankdir="BT"' in dot.read_text()


def test_group_by_worker(tmp_path):
    doc = draw.net_json(_nasty_net())
    draw.annotate_partition(doc, {"in": {"worker_group": 0}, NASTY[0]: {"worker_group": 1, "worker": 3}})
    dot = to_dot(doc, group_by="worker")
    assert 'subgraph "cluster_worker_group_0"' in dot and 'subgraph "cluster_worker_group_1"' in dot
    assert "wg1 w3" in dot


def test_labels_and_rankdir():
    doc = draw.net_json('name: "n" layer { name: "p" type: "Pooling" bottom: "x" top: "p" '
                        'pooling_param { pool: AVE kernel_size: 3 stride: 2 } }')
    assert "AVE, k3 s2" in to_dot(doc)
    with pytest.raises(CaffeError, match="rankdir"):
        to_dot(doc, rankdir="UP")


def test_draw_net_api(tmp_path):
    from caffepy.proto import caffe_pb2, io
    param = io.read_net(_nasty_net())
    dot = draw.draw_net(param, "LR", ext="dot")
    assert dot.startswith(b"digraph")
    draw.draw_net_to_file(param, str(tmp_path / "n.raw"), phase=caffe_pb2.TEST)
    assert (tmp_path / "n.raw").read_bytes().startswith(b"digraph")
    needs_engine()
    w, h = png_size(draw.draw_net(param, "TB", ext="png"))
    assert 50 < w < 5000 and 100 < h < 5000
    draw.draw_net_to_file(param, str(tmp_path / "n.pdf"), display_lrm=True)
    assert (tmp_path / "n.pdf").read_bytes()[:5] == b"%PDF-"


def test_graphviz_package_drives_dot_executable(tmp_path, monkeypatch):
    pytest.importorskip("graphviz")
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nread -r first\necho \"FAKE $* $first\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CAFFEPY_DOT", str(fake))
    assert render_mod.find_engine() == "graphviz"
    out = render_mod.render(to_dot(draw.net_json(_nasty_net())), "svg")
    assert out.startswith(b"FAKE ") and b"-Tsvg" in out and b"digraph" in out


def test_missing_engines_error_in_subprocess(tmp_path):
    import subprocess
    import sys
    net = tmp_path / "n.prototxt"
    net.write_text(_nasty_net())
    code = ("import sys; sys.modules['pygraphviz'] = None; sys.modules['graphviz'] = None; "
            "from caffepy.cli import main; sys.exit(main(['draw', %r, '-o', %r]))"
            % (str(net), str(tmp_path / "n.svg")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(__import__("os").environ, PATH="/nonexistent", CAFFEPY_DOT=""))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "cannot render .svg" in r.stderr, r.stderr
