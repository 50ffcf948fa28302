"""Inference mode's onnxruntime engine (caffepy.infer.engine / parts / ort): the engine switch,
parity with the exact path, nets cut into onnxruntime and caffepy parts, the fallback when the
check fails, kept blobs, reshapes, Classifier, the commands and the path without onnxruntime."""
import logging
import os
import re
import sys
import textwrap

import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing.random_weights import randomize

from .test_optimize import FIRE, MODELS, SMALL, _compare, _net

ort = pytest.importorskip("onnxruntime")

PYLAYERS = textwrap.dedent('''
    import numpy as np
    import caffe

    class Affine(caffe.Layer):
        """y = 2 x + 1"""
        def setup(self, bottom, top): pass
        def reshape(self, bottom, top): top[0].reshape(*bottom[0].data.shape)
        def forward(self, bottom, top): top[0].data[...] = 2 * bottom[0].data + 1
        def backward(self, top, propagate_down, bottom): pass

    class Counter(caffe.Layer):
        """A source: batch n holds n + a fixed pattern; its state is n."""
        def setup(self, bottom, top):
            self.n = 0
            self.pattern = np.random.default_rng(0).standard_normal((2, 3, 9, 8))
        def reshape(self, bottom, top): top[0].reshape(2, 3, 9, 8)
        def forward(self, bottom, top):
            top[0].data[...] = self.pattern + self.n
            self.n += 1
        def backward(self, top, propagate_down, bottom): pass
        def get_state(self): return {"n": self.n}
        def set_state(self, state): self.n = int(state["n"])
''')

CUT = '''
name: "cut"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 9 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "sc1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "py" type: "Python" bottom: "conv1" top: "py"
  python_param { module: "caffepy_test_ort_layers" layer: "Affine" } }
layer { name: "conv2" type: "Convolution" bottom: "py" top: "conv2"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "cat" type: "Concat" bottom: "conv2" bottom: "conv1" top: "cat" }
layer { name: "mish" type: "Mish" bottom: "cat" top: "mish" }
layer { name: "pool" type: "Pooling" bottom: "mish" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip" inner_product_param { num_output: 5 } }
layer { name: "ip2" type: "InnerProduct" bottom: "pool" top: "ip2" inner_product_param { num_output: 5 } }
layer { name: "sum" type: "Eltwise" bottom: "ip" bottom: "ip2" top: "sum" }
layer { name: "prob" type: "Softmax" bottom: "sum" top: "prob" }
'''


@pytest.fixture
def pylayers(tmp_path, monkeypatch):
    (tmp_path / "caffepy_test_ort_layers.py").write_text(PYLAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "caffepy_test_ort_layers", raising=False)


def _pair(source, engine="onnxruntime", keep=(), seed=0):
    exact, fast = _compare(source, keep=keep, seed=seed, engine=engine)
    return exact, fast


def _rel(got, want):
    return np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30)


# -- the switch --------------------------------------------------------------------------------
def test_engine_switch_argument_and_environment(monkeypatch):
    from caffepy.infer import engine
    monkeypatch.delenv(engine.ENV, raising=False)
    assert engine.choose() == "auto" and engine.choose("caffepy") == "caffepy"
    monkeypatch.setenv(engine.ENV, "caffepy")
    assert engine.choose() == "caffepy" and engine.choose("onnxruntime") == "onnxruntime"
    net = _net(SMALL)
    randomize(net)
    assert net.optimize().engine == "caffepy"                       # from the environment
    net = _net(SMALL)
    randomize(net)
    assert net.optimize(engine="auto").choice is not None           # the argument wins
    monkeypatch.setenv(engine.ENV, "tensorrt")
    with pytest.raises(NetError, match="one of auto, caffepy, onnxruntime, openvino.*tensorrt"):
        _net(SMALL).optimize()
    monkeypatch.delenv(engine.ENV)
    param = caffe_pb2.NetParameter()
    from google.protobuf import text_format
    text_format.Parse(SMALL, param)
    net = Net(param, caffe_pb2.TEST, optimize="onnxruntime")
    assert net._plan.engine == "onnxruntime"
    with pytest.raises(NetError, match="already in optimize mode"):
        net.optimize()


# -- parity and parts --------------------------------------------------------------------------
@pytest.mark.parametrize("source,keep", [(SMALL, ["ip2"]), (FIRE, ["ip"])], ids=["small", "fire"])
def test_small_nets_match_the_exact_path(source, keep):
    """Convolution (grouped, dilated), BatchNorm / Scale / Bias (folded), ReLU, pooling,
    Dropout, Concat, InnerProduct, Eltwise, Softmax: one onnxruntime part, within 1e-5."""
    exact, fast = _pair(source, keep=keep)
    plan = fast._plan
    assert [p.kind for p in plan.parts] == ["onnxruntime"] and len(plan.steps) == 1
    if source is SMALL:
        assert ("conv1", ["bn1", "sc1"]) in plan.folded and ("dw", ["bn2", "b2"]) in plan.folded
        with pytest.raises(NetError, match="folded into layer 'conv1'"):
            fast.blobs["conv1"].data
    x = np.random.default_rng(4).standard_normal(exact.blobs["data"].shape)
    want, got = exact.forward(blobs=keep, data=x), fast.forward(blobs=keep, data=x)
    for k in want:
        assert _rel(got[k], want[k]) <= 1e-5, k


@pytest.mark.parametrize("model", ["mobilenet_v1", "squeezenet1_1"])
def test_zoo_nets_match_the_exact_path(model):
    from caffepy.testing.random_weights import logit_blobs
    path = os.path.join(MODELS, model, "%s_deploy.prototxt" % model)
    _pair(path, keep=logit_blobs(Net(path, caffe_pb2.TEST)))


def test_layers_onnx_cannot_express_cut_the_net_into_parts(pylayers):
    """A Python layer and a fork layer without an ONNX converter (Mish) run as caffepy layers
    between three onnxruntime parts; blobs cross the parts (a Split's tops sharing memory,
    conv1 read two parts later); the outputs match the exact path."""
    exact, fast = _pair(CUT, keep=["ip"])
    plan = fast._plan
    assert [p.kind for p in plan.parts] == ["onnxruntime", "caffepy", "onnxruntime", "caffepy",
                                            "onnxruntime"]
    assert [s.name for s in plan.steps] == ["onnxruntime[conv1..conv1_relu1_0_split]", "py",
                                            "onnxruntime[conv2..cat]", "mish",
                                            "onnxruntime[pool..prob]"]
    assert ("conv1", ["bn1", "sc1"]) in plan.folded
    for seed in (5, 6):
        x = np.random.default_rng(seed).standard_normal((2, 3, 9, 8))
        want, got = exact.forward(blobs=["py", "mish"], data=x), \
            fast.forward(blobs=["py", "mish"], data=x)
        for k in want:                       # py and mish: tops of caffepy layers, readable
            assert _rel(got[k], want[k]) <= 1e-5, k


def test_source_layers_are_replayed_by_the_check(pylayers):
    """The check runs the exact path once: a source layer's batch is replayed for the parts and
    its cursor put back, so the first forward sees the first batch."""
    text = CUT.replace('layer { name: "data" type: "Input" top: "data" input_param { shape { '
                       'dim: 2 dim: 3 dim: 9 dim: 8 } } }',
                       'layer { name: "data" type: "Python" top: "data" python_param { '
                       'module: "caffepy_test_ort_layers" layer: "Counter" } }')
    exact = _net(text)
    randomize(exact)
    fast = _net(text)
    fast.copy_trained_layers_from(exact.to_proto())
    assert fast.optimize(engine="onnxruntime").engine == "onnxruntime"
    for _ in range(2):
        np.testing.assert_allclose(fast.forward()["prob"], exact.forward()["prob"], rtol=1e-5,
                                   atol=1e-7)


def test_kept_blobs_are_graph_outputs_and_others_are_not_readable():
    exact, fast = _pair(SMALL, keep=["conv1", "pool", "ip"])
    plan = fast._plan
    assert ("conv1", ["bn1", "sc1"]) not in plan.folded       # kept: its own value is read
    assert {"conv1", "pool", "ip"} <= {b for p in plan.parts for _, b in p.outputs}
    x = np.random.default_rng(2).standard_normal(exact.blobs["data"].shape)
    exact.forward(data=x)
    fast.forward(data=x)
    for name in ("conv1", "pool", "ip", "prob", "sum"):
        assert _rel(fast.blobs[name].data, exact.blobs[name].data) <= 1e-5, name
    with pytest.raises(NetError, match="blob 'r1' is not kept.*inside onnxruntime"):
        fast.blobs["r1"].data


def test_new_batch_rebuilds_the_part():
    exact, fast = _pair(FIRE, keep=["ip"])
    for n, through_reshape in ((5, True), (1, False)):
        x = np.random.default_rng(n).standard_normal((n, 3, 13, 11)).astype(np.float32)
        for net in (exact, fast):
            net.blobs["data"].reshape(x.shape)
            if through_reshape:
                net.reshape()
        want, got = exact.forward(data=x)["prob"], fast.forward(data=x)["prob"]
        assert got.shape == (n, 5)
        assert _rel(got, want) <= 1e-5
    assert fast._plan.rebuilds == 2


# -- the check and the fallback ----------------------------------------------------------------
def test_a_failing_check_leaves_the_engine_out_with_one_warning(monkeypatch, caplog):
    """The check fails for the parts of both runtimes (openvino's plan is onnxruntime's class
    with another runtime): auto runs caffepy's steps, one WARNING per runtime left out."""
    from caffepy.infer import ort as ort_mod
    monkeypatch.setattr(ort_mod.OrtPlan, "check",
                        lambda self, reference=None, seed=0: {"prob": 0.5, "sum": 0.0})
    net = _net(SMALL)
    randomize(net)
    with caplog.at_level(logging.WARNING, logger="caffepy.infer.engine"):
        plan = net.optimize()
    assert plan.engine == "caffepy" and plan.choice["ms"]["onnxruntime"] is None
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
             and "'onnxruntime'" in r.getMessage()]
    assert len(lines) == 1 and re.search(r"leaves out engine 'onnxruntime': blob 'prob' differs "
                                         r"from the exact path by 0\.5 relative", lines[0])
    with pytest.raises(NetError, match="engine 'onnxruntime'.*blob 'prob' differs"):
        _net(SMALL).optimize(engine="onnxruntime")


def test_without_onnxruntime_caffepys_steps_run(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)        # import fails
    monkeypatch.setitem(sys.modules, "openvino", None)
    net = _net(SMALL)
    randomize(net)
    with caplog.at_level(logging.WARNING, logger="caffepy.infer.engine"):
        plan = net.optimize()
    assert plan.engine == "caffepy" and len(plan.steps) == 10 and not caplog.records
    with pytest.raises(NetError, match="onnxruntime is not installed"):
        _net(SMALL).optimize(engine="onnxruntime")


# -- users of the mode -------------------------------------------------------------------------
def test_engine_flag_of_time_and_test(tmp_path, monkeypatch, capsys):
    from caffepy import cli
    from caffepy.infer import engine
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(engine.ENV, raising=False)
    (tmp_path / "net.prototxt").write_text(SMALL)
    net = _net(SMALL)
    randomize(net)
    net.save("w.caffemodel")
    capsys.readouterr()
    assert cli.main(["time", "-model", "net.prototxt", "-iterations", "2", "--optimize",
                     "--engine", "onnxruntime", "--weights", "w.caffemodel"]) == 0
    err = capsys.readouterr().err
    assert "optimize mode: 20 layers run as 1 steps, engine onnxruntime" in err
    assert "Engine onnxruntime (named, or the only one here): no other candidate timed" in err
    assert re.search(r"\] onnxruntime\[conv1\.\.relu4\]\tforward: [\d.e+-]+ ms\.", err)
    assert cli.main(["time", "-model", "net.prototxt", "-iterations", "1", "--optimize",
                     "--weights", "w.caffemodel"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"Engine (\w+) chosen of: \1 [\d.e+-]+ ms, \w+ [\d.e+-]+ ms", err)
    monkeypatch.setenv(engine.ENV, "onnxruntime")
    assert cli.main(["test", "-model", "net.prototxt", "-weights", "w.caffemodel",
                     "-iterations", "1", "--optimize", "--engine", "caffepy"]) == 0
    err = capsys.readouterr().err
    assert "Optimize mode, engine caffepy" in err and "prob = " in err
    assert cli.main(["test", "-model", "net.prototxt", "-weights", "w.caffemodel",
                     "-iterations", "1", "--optimize"]) == 0     # the environment names it
    assert "Optimize mode, engine onnxruntime" in capsys.readouterr().err
    assert cli.main(["test", "-model", "net.prototxt", "-weights", "w.caffemodel",
                     "--engine", "onnxruntime"]) == 1
    assert "--engine onnxruntime chooses inference mode's engine: add --optimize" in \
        capsys.readouterr().err


def test_the_model_bytes_are_what_onnx_writes():
    """caffepy.onnx.wire (no onnx package) encodes the graph as onnx.helper does."""
    onnx = pytest.importorskip("onnx")
    from caffepy.onnx.export import build_graph, to_model
    net = _net(FIRE)
    randomize(net)
    ours = onnx.ModelProto()
    ours.ParseFromString(build_graph(net).to_bytes(net.name, "v"))
    onnx.checker.check_model(ours)
    ref = to_model(net)
    assert list(ours.graph.node) == list(ref.graph.node)
    assert list(ours.graph.initializer) == list(ref.graph.initializer)
    assert list(ours.graph.input) == list(ref.graph.input)
    assert list(ours.graph.output) == list(ref.graph.output)
    assert ours.ir_version == ref.ir_version and ours.opset_import == ref.opset_import


def test_a_part_holding_every_layer_is_the_exported_graph():
    """caffepy.onnx.part.export_part over all layers but the Input layer builds the graph that
    ``caffepy export`` builds; a one-layer part of a layer without a converter is refused."""
    onnx = pytest.importorskip("onnx")
    from caffepy.onnx.export import to_model
    from caffepy.onnx.part import ExportError, export_part
    net = _net(FIRE)
    randomize(net)
    layers = [i for i, lp in enumerate(net.net_param.layer) if lp.type != "Input"]
    part = export_part(net, layers, net.outputs, name=net.name)
    assert part.inputs == [("data", "data")] and [b for _, b in part.outputs] == net.outputs
    ours = onnx.ModelProto()
    ours.ParseFromString(part.model)
    ref = to_model(net)
    assert list(ours.graph.node) == list(ref.graph.node)
    assert list(ours.graph.initializer) == list(ref.graph.initializer)
    assert list(ours.graph.input) == list(ref.graph.input)
    assert list(ours.graph.output) == list(ref.graph.output)
    assert export_part(net, layers[:1]).model is None          # no outputs asked for
    mish = _net(CUT.split('layer { name: "py"')[0] +
                'layer { name: "mish" type: "Mish" bottom: "conv1" top: "mish" }')
    with pytest.raises(ExportError, match="layer 'mish' \\(Mish\\): no ONNX converter"):
        export_part(mish, [len(mish.layers) - 1])


def test_onnxruntime_is_imported_only_when_the_mode_is_entered():
    import subprocess
    code = ("import sys, caffepy, caffepy.infer, caffepy.onnx\n"
            "from caffepy.infer import choice, engine, ort, ov, parts\n"
            "ov.available(), ort.available(), choice.versions()\n"
            "print(sorted(m for m in ('onnx', 'onnxruntime', 'openvino') if m in sys.modules))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=root), check=True).stdout
    assert out.strip() == "[]"


RPN = '''
name: "rpn"
layer { name: "in" type: "Input" top: "rpn_cls_prob" top: "rpn_bbox" top: "im_info" top: "feat"
  input_param { shape { dim: 1 dim: 18 dim: 12 dim: 14 } shape { dim: 1 dim: 36 dim: 12 dim: 14 }
                shape { dim: 1 dim: 3 } shape { dim: 1 dim: 4 dim: 12 dim: 14 } } }
layer { name: "proposal" type: "Python" bottom: "rpn_cls_prob" bottom: "rpn_bbox" bottom: "im_info"
  top: "rois" top: "scores" python_param { module: "caffepy.forks.detection.frcnn.proposal"
  layer: "ProposalLayer" param_str: "'feat_stride': 16" } }
layer { name: "m" type: "Mish" bottom: "feat" top: "featm" }
layer { name: "pool" type: "ROIPooling" bottom: "featm" bottom: "rois" top: "pool"
  roi_pooling_param { pooled_w: 2 pooled_h: 2 spatial_scale: 0.0625 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 3 } }
'''


def test_a_count_known_at_run_time_crosses_parts():
    """An RPN proposal layer (rois counted at run time) in one part, a caffepy layer, then a part
    whose inputs have a symbolic axis 0: new roi counts need no rebuild."""
    exact = _net(RPN)
    randomize(exact)
    fast = _net(RPN)
    fast.copy_trained_layers_from(exact.to_proto())
    plan = fast.optimize(keep=["rois"], engine="onnxruntime")
    assert [(p.kind, p.symbolic, p.dynamic) for p in plan.parts] == [
        ("onnxruntime", True, False), ("caffepy", False, False), ("onnxruntime", True, True)]
    counts = set()
    for seed in (3, 4):
        rng = np.random.default_rng(seed)
        feeds = {n: rng.standard_normal(exact.blobs[n].shape).astype(np.float32)
                 for n in ("rpn_cls_prob", "rpn_bbox", "feat")}
        feeds["rpn_cls_prob"] = np.abs(feeds["rpn_cls_prob"])
        feeds["rpn_bbox"] *= np.float32(0.2)
        feeds["im_info"] = np.array([[192, 224, 1.0]], np.float32)
        want = exact.forward(blobs=["rois"], **feeds)
        got = fast.forward(blobs=["rois"], **feeds)
        for k in want:
            assert got[k].shape == want[k].shape and _rel(got[k], want[k]) <= 1e-5, k
        counts.add(want["rois"].shape[0])
    assert len(counts) == 2 and plan.rebuilds == 0


def test_a_converter_that_does_not_fit_its_layer_leaves_the_layer_to_caffepy(monkeypatch):
    """A converter that meets a layer class it was not written for (a fork's variant of the
    type name) refuses it; the layer runs in caffepy between parts, the outputs unchanged."""
    from caffepy.onnx import builder, ops_norm
    real = ops_norm.softmax

    def other_class(ctx):
        if ctx.name == "prob":
            return ctx.layer.across_spatial
        return real(ctx)
    monkeypatch.setitem(builder.CONVERTERS, "Softmax", other_class)
    exact, fast = _pair(SMALL)
    assert "prob" in [s.name for s in fast._plan.steps]
