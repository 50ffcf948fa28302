"""caffepy view without a browser: the page's data, its escaping, the layout, the server."""
import http.client
import json
import os
import re

from caffepy import cli
from caffepy.view import curves, data, layout, page
from caffepy.view.server import ViewServer
from . import netgen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LENET = os.path.join(ROOT, "models", "lenet", "lenet_train_test.prototxt")
RESNET50 = os.path.join(ROOT, "models", "resnet50", "resnet50_deploy.prototxt")


def _layer(graph, name):
    return next(lr for lr in graph["layers"] if lr["name"] == name)


def test_block_of():
    assert data.block_of("inception_3a/1x1") == "inception_3a"
    assert data.block_of("conv2_1/dw") == "conv2_1"
    for name in ("res2a_branch2a", "bn2a_branch2a", "scale2a_branch1", "res2a", "res2a_relu",
                 "res2a_branch2a_relu"):
        assert data.block_of(name) == "res2a", name
    assert data.block_of("res4b22_branch2c") == "res4b22"
    for name in ("conv1", "bn_conv1", "pool1", "fc1000", "prob", "relu1"):
        assert data.block_of(name) is None, name


def test_embedded_json_cannot_close_the_script():
    doc = {"names": netgen.HOSTILE}
    text = page.embed_json(doc)
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert json.loads(text) == doc


def test_lenet_both_phases_shapes_and_edges():
    doc = data.from_prototxt(LENET)
    assert set(doc["phases"]) == {"TRAIN", "TEST"} and doc["phase"] == "TEST"
    train, test = doc["phases"]["TRAIN"], doc["phases"]["TEST"]
    assert "accuracy" in [lr["name"] for lr in test["layers"]]
    assert "accuracy" not in [lr["name"] for lr in train["layers"]]
    conv1 = _layer(test, "conv1")
    assert conv1["top_shapes"][0][1:] == [20, 24, 24]
    assert [p["shape"] for p in conv1["params"]] == [[20, 1, 5, 5], [20]]
    assert conv1["param_count"] == 520 and conv1["flops"] > 0 and conv1["memory"] > 0
    assert 'num_output: 20' in conv1["text"]
    names = [lr["name"] for lr in test["layers"]]
    edges = {(names[a], names[b], blob) for a, b, blob in test["edges"]}
    assert ("ip1", "relu1", "ip1") in edges and ("relu1", "ip2", "ip1") in edges  # in place
    assert len(test["layout"]["nodes"]) == len(test["layers"])
    assert test["total"]["param_count"] == sum(lr["param_count"] for lr in test["layers"])


def test_blocks_and_collapsed_layout():
    g = data.from_prototxt(RESNET50)["phases"]["TEST"]
    names = {b["name"] for b in g["blocks"]}
    assert {"res2a", "res3d", "res5c"} <= names
    res2a = next(b for b in g["blocks"] if b["name"] == "res2a")
    assert {g["layers"][i]["name"] for i in res2a["members"]} >= {
        "res2a_branch1", "bn2a_branch1", "res2a_branch2c", "res2a", "res2a_relu"}
    c = g["collapsed"]
    assert len(c["node_of"]) == len(g["layers"]) + len(g["inputs"])
    assert len(c["layout"]["nodes"]) == len(c["sizes"]) < len(g["layers"]) / 3


def test_layer_that_does_not_build_says_why():
    text = ('layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n'
            'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 2 kernel_size: 3 } }\n'
            'layer { name: "decode" type: "MysteryDecoder" bottom: "conv" top: "boxes" }\n')
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "view_unbuilt_%d.prototxt" % os.getpid())
    with open(path, "w") as f:
        f.write(text)
    try:
        g = data.from_prototxt(path)["phases"]["TEST"]
    finally:
        os.remove(path)
    decode = _layer(g, "decode")
    assert "MysteryDecoder" in decode["error"]
    assert any("no caffepy layer" in line for line in decode["forks"])
    assert _layer(g, "conv")["top_shapes"] == [[1, 2, 6, 6]] and _layer(g, "conv")["error"] is None


def test_geometry_error_is_shown_on_its_layer(tmp_path):
    p = tmp_path / "bad.prototxt"
    p.write_text('layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n'
                 'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 2 kernel_size: 999 } }\n'
                 'layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }\n')
    g = data.from_prototxt(str(p))["phases"]["TEST"]
    assert g["error"] and _layer(g, "conv")["error"] == g["error"]
    assert len(g["layers"]) == 3 and len(g["edges"]) == 2      # the graph is still there


def test_fork_type_and_field_are_named(tmp_path):
    p = tmp_path / "fork.prototxt"
    p.write_text('layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } } }\n'
                 'layer { name: "reorg" type: "Reorg" bottom: "data" top: "r" reorg_param { stride: 2 } }\n'
                 'layer { name: "conv" type: "Convolution" bottom: "r" top: "c" convolution_param { '
                 'num_output: 2 kernel_size: 1 conv_mode: 1 } }\n')
    g = data.from_prototxt(str(p))["phases"]["TEST"]
    assert any("Reorg" in line and "YOLO" in line for line in _layer(g, "reorg")["forks"])
    assert any("ConvolutionParameter.conv_mode" in line for line in _layer(g, "conv")["forks"])


def test_layered_layout_without_graphviz(monkeypatch):
    monkeypatch.setattr(layout, "_run_dot", lambda source: None)
    monkeypatch.setattr(layout, "_run_pygraphviz", lambda source: None)
    g = data.from_prototxt(LENET)["phases"]["TRAIN"]
    assert g["layout"]["engine"] == "layered"
    ys = g["layout"]["nodes"]
    for a, b, _ in g["edges"]:
        assert ys[a][1] < ys[b][1]          # top-down
    assert data._graph([], [])["layout"]["nodes"] == []
    c = data.from_prototxt(RESNET50)["phases"]["TEST"]["collapsed"]     # blocks come first there
    ys = c["layout"]["nodes"]
    assert c["layout"]["engine"] == "layered"
    assert all(ys[a][1] < ys[b][1] for a, b in c["edges"])
    cyc = layout.layered([(50, 30)] * 3, [(0, 1), (1, 2), (2, 1)])       # a cycle still places
    assert cyc["nodes"][0][1] < cyc["nodes"][1][1] < cyc["nodes"][2][1]


def test_resnet50_page_under_1mb(tmp_path):
    out = tmp_path / "r50.html"
    assert cli.main(["view", RESNET50, "-o", str(out)]) == 0
    html = out.read_text()
    assert len(html.encode("utf-8")) < 1_000_000
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)   # nothing to fetch
    assert html.count("<script") == 2 and "Content-Security-Policy" in html


def test_hostile_names_stay_data(tmp_path):
    p = tmp_path / "hostile.prototxt"
    p.write_text(netgen.hostile())
    out = tmp_path / "h.html"
    assert cli.main(["view", str(p), "-o", str(out)]) == 0
    html = out.read_text()
    assert html.count("<script") == 2 and html.count("</script>") == 2
    assert "<img" not in html and "onerror" not in html.split('id="caffepy-data">')[0]


def test_curves_from_a_log(tmp_path):
    log = tmp_path / "train.log"
    lines = ["I1121 10:00:00.000000  1 solver.cpp:1] Solving LeNet\n"]
    for it in (0, 100, 200):
        lines += ["I1121 10:00:%02d.000000  1 solver.cpp:2] Iteration %d, Testing net (#0)\n" % (it // 10, it),
                  "I1121 10:00:%02d.000000  1 solver.cpp:3]     Test net output #0: accuracy = 0.9\n" % (it // 10),
                  "I1121 10:00:%02d.000000  1 solver.cpp:4]     Test net output #1: loss = 0.3 (* 1 = 0.3 loss)\n" % (it // 10),
                  "I1121 10:00:%02d.000000  1 solver.cpp:5] Iteration %d, loss = 2.3\n" % (it // 10, it),
                  "I1121 10:00:%02d.000000  1 solver.cpp:6]     Train net output #0: loss = 2.3 (* 1 = 2.3 loss)\n" % (it // 10),
                  "I1121 10:00:%02d.000000  1 sgd_solver.cpp:7] Iteration %d, lr = 0.01\n" % (it // 10, it)]
    log.write_text("".join(lines))
    c = curves.read_curves([str(log)])
    kinds = {(s["phase"], s["kind"]) for s in c["series"]}
    assert {("train", "loss"), ("train", "lr"), ("test", "accuracy"), ("test", "loss")} <= kinds
    assert curves.read_curves([str(tmp_path / "absent.log")]) is None
    follow = curves.Follow([str(log)])
    first = follow()
    assert follow() is first                        # unchanged log: not parsed again
    with open(str(log), "a") as f:
        f.write("".join(lines[1:]).replace("Iteration 0,", "Iteration 300,"))
    assert follow() is not first and follow() == curves.read_curves([str(log)])


def _get(port, path, host=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", "127.0.0.1:%d" % port if host is None else host)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def test_server_serves_only_the_page_and_curves():
    calls = []
    server = ViewServer(lambda: b"<html>page</html>", lambda: calls.append(1) or {"series": []})
    server.start()
    try:
        port = server.server_address[1]
        assert server.server_address[0] == "127.0.0.1"
        assert _get(port, "/") == (200, b"<html>page</html>")
        assert _get(port, "/", host="localhost:%d" % port)[0] == 200
        assert _get(port, "/curves.json") == (200, b'{"series": []}') and calls
        for path in ("/etc/passwd", "/../../etc/passwd", "/static/graph.js", "/curves.json/x",
                     "//127.0.0.1/", "/%2e%2e/"):
            assert _get(port, path)[0] == 404, path
        for host in ("evil.example:%d" % port, "127.0.0.1", "127.0.0.1:1", "localhost.evil.com:%d" % port, ""):
            assert _get(port, "/", host=host)[0] == 403, host
        assert _get(port, "/", method="POST")[0] == 405
    finally:
        server.shutdown()
        server.server_close()


def test_net_json_and_workspace(tmp_path):
    ws = netgen.make_workspace(tmp_path / "ws")
    doc = data.from_workspace(str(ws))
    assert doc["source"] == "workspace" and doc["cluster"]["worker_groups"]
    g = doc["phases"][doc["phase"]]
    ip1 = _layer(g, "ip1")
    assert ip1["placement"] and ip1["params"][0]["shape"] == [7, 16]
    assert data.workspace_logs(str(ws)) == [str(ws / "train.log")]
    assert curves.read_curves(data.workspace_logs(str(ws)))["series"]
    doc2 = data.from_net_json(str(ws / "visualization" / "net.json"))
    assert doc2["cluster"] == doc["cluster"]


def test_command_serves_until_interrupted(tmp_path):
    import signal
    import subprocess
    import sys
    import urllib.request
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "caffepy", "view", LENET, "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(tmp_path),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url, timeout=10) as r:
            assert b'id="caffepy-data"' in r.read()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped" in out


def test_browser_opened_unless_told_not(monkeypatch):
    import webbrowser
    from caffepy.commands import view
    opened = []
    monkeypatch.setattr(webbrowser, "open", opened.append)

    def interrupted(self, *a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(ViewServer, "serve_forever", interrupted)
    doc = data.from_prototxt(LENET)
    assert view.serve(doc, [], browser=True) == 0 and len(opened) == 1
    assert opened[0].startswith("http://127.0.0.1:")
    assert view.serve(doc, [], browser=False) == 0 and len(opened) == 1


def test_net_json_of_both_phases_and_an_empty_one(tmp_path):
    from caffepy import draw
    path = tmp_path / "lenet.json"
    draw.write_net_json(LENET, str(path))
    doc = data.from_net_json(str(path))
    assert doc["phase"] == "TEST" and set(doc["phases"]) == {"TRAIN", "TEST"}
    assert "accuracy" in [lr["name"] for lr in doc["phases"]["TEST"]["layers"]]
    assert "accuracy" not in [lr["name"] for lr in doc["phases"]["TRAIN"]["layers"]]
    assert doc["phases"]["TEST"]["total"]["flops"] is None
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema": "caffepy.netjson", "version": 1, "name": "e",
                                 "phase": "ALL", "nodes": [], "links": []}))
    doc = data.from_net_json(str(empty))
    assert doc["phases"]["TEST"]["layers"] == [] and page.render_page(doc)
