"""caffepy view in a real browser (Debian's chromium through playwright): the page loads without
errors, one node per layer, the panel shows the right shapes, search, blocks, phases, the summary
table, a distributed run, the served page following a log, hostile names, a 1,000-layer net."""
import glob
import os
import time

import pytest

from caffepy.view import data, page
from caffepy.view.server import ViewServer
from . import netgen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("CAFFEPY_SHARED", os.path.join(ROOT, "..", "shared"))
MODELS = sorted(glob.glob(os.path.join(ROOT, "models", "*", "*.prototxt")))
MODELS = [m for m in MODELS if "solver" not in os.path.basename(m) and "cluster" not in os.path.basename(m)]
ZOO = """bvlc/models/bvlc_googlenet/deploy.prototxt bvlc/models/bvlc_googlenet/train_val.prototxt
bvlc/models/bvlc_alexnet/deploy.prototxt bvlc/models/bvlc_reference_caffenet/deploy.prototxt
bvlc/models/bvlc_reference_rcnn_ilsvrc13/deploy.prototxt bvlc/models/finetune_flickr_style/deploy.prototxt
bvlc_history/v1_11a4c1655/models/bvlc_googlenet/deploy.prototxt
bvlc_history/v1_11a4c1655/models/bvlc_alexnet/train_val.prototxt
KaimingHe__deep-residual-networks/prototxt/ResNet-50-deploy.prototxt
KaimingHe__deep-residual-networks/prototxt/ResNet-152-deploy.prototxt
shicai__MobileNet-Caffe/mobilenet_deploy.prototxt shicai__MobileNet-Caffe/mobilenet_v2_deploy.prototxt
s9xie__hed/examples/hed/deploy.prototxt cvjena__cnn-models/ResNet_preact/ResNet10_cvgj/deploy.prototxt
cvjena__cnn-models/VGG19_cvgj/deploy.prototxt CSAILVision__places365/deploy_googlenet_places365.prototxt
forresti__SqueezeNet/SqueezeNet_v1.0/deploy.prototxt forresti__SqueezeNet/SqueezeNet_v1.1/deploy.prototxt
LisaAnne__lisa-caffe-public/examples/LRCN_activity_recognition/deploy_lstm.prototxt
rbgirshick__py-faster-rcnn/models/pascal_voc/ZF/faster_rcnn_end2end/test.prototxt
soeaver__caffe-model/det/faster_rcnn/models/pascal_voc/mobilenet/deploy_faster_voc_mobilenet-dw.prototxt
""".split()


def _write(doc, folder, name):
    path = os.path.join(str(folder), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page.render_page(doc))
    return path


def _shape(s):
    return "\u00d7".join(str(d) for d in s) if s is not None else "?"


def _find(pg, name):
    """Search for a layer by name; the page centres the exact match; returns its node."""
    pg.page.fill("#search", name)
    k = pg.page.evaluate("""(name) => { const n = [...document.querySelectorAll('.node.layer')]
        .find(e => e.querySelector('text').textContent === name); return n ? n.getAttribute('data-k') : null; }""",
                         name)
    assert k is not None, name
    return pg.page.locator('.node[data-k="%s"]' % k)


def check_page(pg, doc):
    """No errors, one node per layer of the phase shown, and clicking a layer shows its shapes."""
    assert pg.errors == [] and pg.dialogs == []
    g = doc["phases"][doc["phase"]]
    assert pg.page.locator(".node.layer").count() == len(g["layers"])
    known = [lr for lr in g["layers"] if lr["top_shapes"] and all(lr["top_shapes"]) and lr["bottoms"]]
    if not known:
        return
    lr = known[len(known) // 2]
    _find(pg, lr["name"]).click()
    assert pg.page.text_content("#panel h2") == lr["name"]
    shown = pg.page.locator("#panel table.tops td.shape").all_text_contents()
    assert shown == [_shape(s) for s in lr["top_shapes"]]
    assert pg.errors == []


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return tmp_path_factory.mktemp("pages")


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=lambda p: os.path.relpath(p, ROOT))
def test_models(open_page, pages, path):
    doc = data.from_prototxt(path)
    pg = open_page(_write(doc, pages, os.path.basename(path) + ".html"))
    check_page(pg, doc)


@pytest.mark.slow
@pytest.mark.parametrize("rel", ZOO)
def test_modelzoo(open_page, pages, rel):
    path = os.path.join(SHARED, "modelzoo", rel)
    if not os.path.exists(path):
        pytest.skip("needs ../shared/modelzoo/%s" % rel)
    doc = data.from_prototxt(path)
    pg = open_page(_write(doc, pages, rel.replace("/", "_") + ".html"))
    check_page(pg, doc)


@pytest.mark.slow
def test_search_collapse_phase_and_table(open_page, pages):
    doc = data.from_prototxt(os.path.join(ROOT, "models", "googlenet", "googlenet_deploy.prototxt"))
    g = doc["phases"]["TEST"]
    pg = open_page(_write(doc, pages, "googlenet.html"))
    p = pg.page
    p.fill("#search", "4c/pool")
    assert p.locator(".node.match").count() == 2          # inception_4c/pool and /pool_proj
    assert p.text_content("#search-info") == "1 of 2"
    p.keyboard.press("Enter")                             # the next match
    assert p.text_content("#search-info") == "2 of 2"
    pane = p.locator("#graph-pane").bounding_box()
    box = p.locator(".node.match", has_text="inception_4c/pool_proj").bounding_box()
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert abs(centre[0] - (pane["x"] + pane["width"] / 2)) < 2       # centred on the match
    assert abs(centre[1] - (pane["y"] + pane["height"] / 2)) < 2
    p.mouse.move(pane["x"] + 100, pane["y"] + 100)                   # pan: drag
    p.mouse.down()
    p.mouse.move(pane["x"] + 160, pane["y"] + 140, steps=4)
    p.mouse.up()
    moved = p.locator(".node.match", has_text="inception_4c/pool_proj").bounding_box()
    assert abs(moved["x"] - box["x"] - 60) < 2 and abs(moved["y"] - box["y"] - 40) < 2
    p.mouse.wheel(0, -300)                                           # zoom in
    assert p.locator(".node.match", has_text="inception_4c/pool_proj").bounding_box()["width"] > \
        moved["width"] * 1.2
    p.fill("#search", "Concat")
    assert p.locator(".node.match").count() == 9
    p.keyboard.press("Escape")
    assert p.locator(".node.match").count() == 0 and p.input_value("#search") == ""
    p.fill("#search", "Concat")
    p.click("#collapse")
    assert p.locator(".node.block").count() == len(g["blocks"])
    outside = sum(1 for lr in g["layers"] if lr.get("block") is None)
    assert p.locator(".node.layer").count() == outside
    assert p.locator(".node.block.match").count() == 9     # blocks holding a Concat
    p.locator(".node.block", has_text="inception_3a").click()
    assert p.text_content("#panel h2") == "inception_3a"
    p.locator("#panel .members li", has_text="inception_3a/5x5_reduce").click()   # expands
    assert p.locator(".node.block").count() == 0
    assert p.text_content("#panel h2") == "inception_3a/5x5_reduce"
    p.click("#tab-table")
    p.click("#summary th[data-key=param_count]")
    first = p.locator("#summary tbody tr").first.locator("td").nth(1).text_content()
    assert first == max(g["layers"], key=lambda lr: lr["param_count"] or 0)["name"]
    foot = p.locator("#summary tfoot td").all_text_contents()
    assert foot[4] == "{:,}".format(g["total"]["param_count"])
    assert pg.errors == [] and p.is_disabled("#phase-TRAIN")

    doc = data.from_prototxt(os.path.join(ROOT, "models", "lenet", "lenet_train_test.prototxt"))
    pg = open_page(_write(doc, pages, "lenet.html"))
    p = pg.page
    names = lambda: p.locator(".node.layer text:not(.sub)").all_text_contents()  # noqa: E731
    assert "accuracy" in names() and len(names()) == len(doc["phases"]["TEST"]["layers"])
    p.click("#phase-TRAIN")
    assert "accuracy" not in names() and len(names()) == len(doc["phases"]["TRAIN"]["layers"])
    _find(pg, "conv1").click()
    train_shape = p.locator("#panel table.tops td.shape").first.text_content()
    p.click("#phase-TEST")
    assert p.text_content("#panel h2") == "conv1"           # the selection follows the phase
    assert p.locator("#panel table.tops td.shape").first.text_content() != train_shape  # batch 64 / 100
    assert pg.errors == []


def test_hostile_names_stay_text(open_page, pages, tmp_path):
    src = tmp_path / "hostile.prototxt"
    src.write_text(netgen.hostile())
    doc = data.from_prototxt(str(src))
    pg = open_page(_write(doc, pages, "hostile.html"))
    p = pg.page
    texts = p.locator(".node.layer text:not(.sub)").all_text_contents()
    assert texts == [lr["name"] for lr in doc["phases"]["TEST"]["layers"]]
    assert set(netgen.HOSTILE) - set(texts) == {netgen.HOSTILE[2]}     # a TRAIN-only layer
    assert p.text_content("#title").startswith(netgen.HOSTILE[0])
    for k in range(p.locator(".node.layer").count()):
        p.locator(".node.layer").nth(k).click()
        assert p.text_content("#panel h2") in netgen.HOSTILE
    p.click("#phase-TRAIN")
    assert netgen.HOSTILE[2] in p.locator(".node.layer text:not(.sub)").all_text_contents()
    p.fill("#search", "<img")
    assert p.locator(".node.match").count() == 1
    p.click("#tab-table")
    assert netgen.HOSTILE[0] in p.locator("#summary tbody").text_content()
    assert p.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert p.evaluate("document.scripts.length") == 2
    assert pg.dialogs == [] and pg.errors == []


def test_distributed_run(open_page, pages, tmp_path):
    ws = netgen.make_workspace(tmp_path / "ws")
    from caffepy.view.curves import read_curves
    doc = data.from_workspace(str(ws))
    doc["curves"] = read_curves(data.workspace_logs(str(ws)))
    pg = open_page(_write(doc, pages, "dist.html"))
    p = pg.page
    check_page(pg, doc)
    p.click("#tab-cluster")
    assert p.locator("#cluster table.groups tr").count() == 1 + 2
    assert p.locator("#cluster table.servers tr").count() == 1 + 2
    assert p.locator("#cluster-diagram .group").count() == 2
    assert p.locator("#cluster-diagram .server").count() == 2
    slices = p.locator("#cluster table.servers").text_content()
    assert "ip2:0 [0:" in slices
    assert p.locator(".node.layer", has_text="ip2").locator("text.badge").text_content() == "shards 0,1"
    assert "SFB" in p.locator(".node.layer", has_text="ip1").locator("text.badge").text_content()
    _find(pg, "ip1").click()
    assert "worker group" in p.locator("#panel table.kv").text_content()
    p.click("#tab-curves")
    assert p.locator("#curves svg.chart").count() >= 2
    assert pg.errors == []


def test_served_page_follows_the_log(open_page, tmp_path):
    from caffepy.view.curves import read_curves
    log = tmp_path / "train.log"
    log.write_text("I1121 10:00:00.000000  1 solver.cpp:1] Solving LeNet\n")
    doc = data.from_prototxt(os.path.join(ROOT, "models", "lenet", "lenet_train_test.prototxt"))
    doc.update(curves=read_curves([str(log)]), poll=True, poll_ms=300)
    body = page.render_page(doc).encode("utf-8")
    server = ViewServer(lambda: body, lambda: read_curves([str(log)]))
    server.start()
    try:
        pg = open_page(server.url)
        p = pg.page
        assert p.locator("#curves svg.chart").count() == 0
        with open(str(log), "a") as f:
            for it in (0, 100, 200):
                f.write("I1121 10:00:%02d.000000  1 solver.cpp:5] Iteration %d, loss = 2.3\n" % (it // 10, it))
                f.write("I1121 10:00:%02d.000000  1 solver.cpp:6]     Train net output #0: loss = %g\n"
                        % (it // 10, 2.3 - it / 100.0))
                f.write("I1121 10:00:%02d.000000  1 sgd_solver.cpp:7] Iteration %d, lr = 0.01\n" % (it // 10, it))
        p.wait_for_selector("#curves svg.chart", state="attached", timeout=10000)
        assert p.locator('#curves svg.chart[data-title="Loss"]').count() == 1
        assert pg.errors == []
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_1000_layers_in_under_2s(open_page, pages, tmp_path):
    src = tmp_path / "deep.prototxt"
    src.write_text(netgen.deep_resnet())
    t = time.time()
    doc = data.from_prototxt(str(src))
    built = time.time() - t
    g = doc["phases"]["TEST"]
    assert len(g["layers"]) >= 1000
    pg = open_page(_write(doc, pages, "deep.html"))
    ready_ms = int(pg.page.get_attribute("body", "data-ready-ms"))
    print("1,021 layers: page data built in %.2f s, shown %d ms after navigation" % (built, ready_ms))
    assert ready_ms < 2000
    assert pg.page.locator(".node.layer").count() == len(g["layers"])
    pg.page.click("#collapse")
    assert pg.page.locator(".node.block").count() == len(g["blocks"]) >= 77
    assert pg.errors == []


def test_unbuilt_layer_and_empty_net(open_page, pages, tmp_path):
    src = tmp_path / "unbuilt.prototxt"
    src.write_text(
        'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n'
        'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 2 kernel_size: 3 } }\n'
        'layer { name: "decode" type: "MysteryDecoder" bottom: "conv" top: "boxes" }\n')
    doc = data.from_prototxt(str(src))
    pg = open_page(_write(doc, pages, "unbuilt.html"))
    p = pg.page
    assert p.locator(".node.layer.bad").count() == 1
    p.locator(".node.layer.bad").click()
    assert p.text_content("#panel h2") == "decode"
    assert "MysteryDecoder" in p.text_content("#panel .error")
    assert "no caffepy layer" in p.text_content("#panel .fork")
    p.click("#tab-notes")
    assert "does not build" in p.text_content("#notes") or "MysteryDecoder" in p.text_content("#notes")
    empty = tmp_path / "empty.json"
    empty.write_text('{"schema": "caffepy.netjson", "version": 1, "name": "e", "phase": "ALL", '
                     '"nodes": [], "links": []}')
    pg = open_page(_write(data.from_net_json(str(empty)), pages, "empty.html"))
    assert pg.page.locator(".node").count() == 0 and pg.errors == []
