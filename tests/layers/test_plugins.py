"""Plug-in layers: @caffepy.register_layer, loaded by --layers, CAFFEPY_LAYERS or an entry point."""
import importlib
import logging
import os
import sys
import textwrap

import numpy as np
import pytest

import caffepy
from caffepy import cli
from caffepy.errors import CaffeError, NetError
from caffepy.layers import base, plugins
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

SQUARE = textwrap.dedent('''
    import numpy as np
    import caffepy

    @caffepy.register_layer("PlugSquare")
    class PlugSquare(caffepy.LayerBase):
        """y = s_c * x^2 with one learnable scale per channel (axis 1), initially 0.5."""
        exact_num_bottom_blobs = 1
        exact_num_top_blobs = 1

        def layer_setup(self, bottom, top):
            if not self.blobs:
                self.blobs = [self.new_blob((bottom[0].shape[1],))]
                self.blobs[0].data[...] = 0.5
            self.param_propagate_down = [True]

        def reshape(self, bottom, top):
            top[0].reshape(bottom[0].shape)

        def _scale(self, x):
            return self.blobs[0].data.reshape((1, -1) + (1,) * (x.ndim - 2))

        def forward_cpu(self, bottom, top):
            x = bottom[0].data
            top[0].data[...] = self._scale(x) * x * x

        def backward_cpu(self, top, propagate_down, bottom):
            x, dy = bottom[0].data, top[0].diff
            axes = tuple(i for i in range(x.ndim) if i != 1)
            self.blobs[0].diff[...] += np.sum(dy * x * x, axis=axes)
            if propagate_down[0]:
                bottom[0].diff[...] = 2 * self._scale(x) * x * dy
''')

SHAPES_ONLY = textwrap.dedent('''
    import caffepy

    @caffepy.register_layer("PlugHalve")
    class PlugHalve(caffepy.LayerBase):
        """Halves the last axis: shapes only, no forward_cpu."""
        exact_num_bottom_blobs = 1
        exact_num_top_blobs = 1

        def reshape(self, bottom, top):
            top[0].reshape(bottom[0].shape[:-1] + (bottom[0].shape[-1] // 2,))
''')

NET = '''name: "plug"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "sq" type: "%s" bottom: "data" top: "sq" }
layer { name: "ip" type: "InnerProduct" bottom: "sq" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.1 } } }
'''

_MODULE_PREFIXES = ("plugtest_", "caffepy_plugin_")


@pytest.fixture(autouse=True)
def _registry(monkeypatch):
    """Every test leaves the registry, the plug-in modules and the logger as it found them."""
    monkeypatch.delenv(plugins.ENV, raising=False)
    types, paths = set(plugins.plugin_types()), dict(plugins._PATH_MODULES)
    yield
    for name in set(plugins.plugin_types()) - types:
        plugins.unregister_layer(name)
    for name in [m for m in sys.modules if m.startswith(_MODULE_PREFIXES)]:
        del sys.modules[name]
    plugins._PATH_MODULES.clear()
    plugins._PATH_MODULES.update(paths)
    plugins.reset()
    from caffepy.log import teardown
    teardown()


@pytest.fixture
def plugdir(tmp_path, monkeypatch):
    """tmp_path on sys.path with plugtest_square.py, plugtest_halve.py and a net for each."""
    (tmp_path / "plugtest_square.py").write_text(SQUARE)
    (tmp_path / "plugtest_halve.py").write_text(SHAPES_ONLY)
    (tmp_path / "square.prototxt").write_text(NET % "PlugSquare")
    (tmp_path / "halve.prototxt").write_text(NET % "PlugHalve")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def records():
    logger = logging.getLogger("caffepy")
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_package_exports():
    assert caffepy.LayerBase is base.Layer
    assert caffepy.register_layer is plugins.register_layer
    assert caffepy.Layer is not caffepy.LayerBase      # pycaffe's Python-layer base stays


def test_summary_with_layers_flag(plugdir, capsys):
    assert cli.main(["summary", "square.prototxt", "--layers", "plugtest_square"]) == 0
    out = capsys.readouterr().out
    assert "PlugSquare" in out and "2x3x4x4" in out.replace(", ", "x").replace(" ", "")


def test_time_with_layers_flag(plugdir, capsys):
    argv = ["time", "-model", "square.prototxt", "-iterations", "1", "-layers", "plugtest_square"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "sq\tforward:" in err and "Average Forward-Backward" in err


def test_env_variable(plugdir, monkeypatch):
    monkeypatch.setenv(plugins.ENV, "plugtest_halve, plugtest_square")
    plugins.reset()
    assert base.get_layer_class("PlugSquare").__module__ == "plugtest_square"
    assert base.get_layer_class("PlugHalve").__module__ == "plugtest_halve"
    assert plugins.env_specs({plugins.ENV: "a%sb,c" % os.pathsep}) == ["a", "b", "c"]


def test_py_path(plugdir, capsys):
    path = str(plugdir / "plugtest_square.py")
    sys.path.remove(str(plugdir))       # found by its path, not on sys.path
    assert cli.main(["summary", "square.prototxt", "--layers", path]) == 0
    assert "PlugSquare" in capsys.readouterr().out
    plugins.load_modules([path])        # the same file again: not executed twice
    assert base.get_layer_class("PlugSquare").__module__.startswith("caffepy_plugin_")


def test_entry_point(plugdir, records):
    dist = plugdir / "plugtest_dist-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugtest-dist\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[caffepy.layers]\nsquare = plugtest_square\nbroken = plugtest_missing_module\n")
    importlib.invalidate_caches()
    plugins.reset()
    assert base.get_layer_class("PlugSquare").__module__ == "plugtest_square"
    broken = [line for line in records if "plugtest_missing_module" in line]
    assert len(broken) == 1 and "entry point 'broken'" in broken[0]
    assert "ModuleNotFoundError" in broken[0] and "\n" not in broken[0]


@pytest.mark.parametrize("source", ["flag", "env"])
def test_module_that_fails_is_one_line(plugdir, monkeypatch, capsys, source):
    (plugdir / "plugtest_bad.py").write_text("import numpy\nraise ValueError('bad constant')\n")
    argv = ["summary", "square.prototxt"]
    if source == "flag":
        argv += ["--layers", "plugtest_bad"]
    else:
        monkeypatch.setenv(plugins.ENV, "plugtest_bad")
        plugins.reset()
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    where = "--layers" if source == "flag" else "CAFFEPY_LAYERS"
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ("cannot load layer plug-in 'plugtest_bad' (from %s): ValueError: bad constant"
            % where) in err


def test_missing_module_is_one_line(plugdir, capsys):
    assert cli.main(["summary", "square.prototxt", "--layers", "plugtest_nowhere"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "'plugtest_nowhere' (from --layers): ModuleNotFoundError" in err


def test_duplicate_registration_names_both_classes():
    with pytest.raises(CaffeError, match=r"'AbsVal' is already registered by "
                       r"caffepy\.layers\.\w+\.AbsValLayer; .*MyAbs .*override=True"):
        @caffepy.register_layer("AbsVal")
        class MyAbs(caffepy.LayerBase):
            pass
    assert base.get_layer_class("AbsVal").__module__.startswith("caffepy.layers")


def test_override_replaces_and_is_reversible(records):
    builtin = base.get_layer_class("AbsVal")

    @caffepy.register_layer("AbsVal", override=True)
    class MyAbs(caffepy.LayerBase):
        pass

    assert base.get_layer_class("AbsVal") is MyAbs
    info = [line for line in records if "overrides" in line]
    assert info == ["layer type 'AbsVal': plug-in %s.%s overrides %s.%s"
                    % (MyAbs.__module__, MyAbs.__qualname__, builtin.__module__,
                       builtin.__qualname__)]
    plugins.unregister_layer("AbsVal")
    assert base.get_layer_class("AbsVal") is builtin


def test_not_a_layer_subclass():
    with pytest.raises(CaffeError, match="not a subclass of caffepy.LayerBase"):
        caffepy.register_layer("PlugPython")(caffepy.Layer)


def test_duplicate_in_module_names_module_and_source(plugdir, capsys):
    (plugdir / "plugtest_dup.py").write_text(
        "import caffepy\n@caffepy.register_layer('ReLU')\nclass R(caffepy.LayerBase):\n    pass\n")
    assert cli.main(["summary", "square.prototxt", "--layers", "plugtest_dup"]) == 1
    err = capsys.readouterr().err
    assert "layer plug-in 'plugtest_dup' (from --layers): layer type 'ReLU' is already" in err


def test_shapes_only_plugin_summary_works(plugdir, capsys):
    assert cli.main(["summary", "halve.prototxt", "--layers", "plugtest_halve"]) == 0
    assert "PlugHalve" in capsys.readouterr().out


def test_shapes_only_plugin_forward_is_one_line(plugdir, capsys):
    argv = ["time", "-model", "halve.prototxt", "-iterations", "1", "-layers", "plugtest_halve"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert ("layer 'sq' (PlugHalve): plugtest_halve.PlugHalve has no forward_cpu" in err[-1])


def test_unknown_type_names_the_way_out(plugdir, capsys):
    """summary shows the layer and what depends on it as '?' and names the plug-in to write in
    one line (exit 0); --strict: the one-line error."""
    assert cli.main(["summary", "square.prototxt"]) == 0
    captured = capsys.readouterr()
    assert [ln.split()[:3] for ln in captured.out.splitlines()[3:5]] == [
        ["sq", "PlugSquare", "?"], ["ip", "InnerProduct", "?"]]
    assert captured.err.count("\n") == 1 and ('a plug-in must supply it: @caffepy.register_layer('
                                              '"PlugSquare") loaded with --layers MODULE') in captured.err
    assert cli.main(["summary", "--strict", "square.prototxt"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "layer 'sq': unknown layer type 'PlugSquare'" in err
    assert ('write a plug-in layer (@caffepy.register_layer("PlugSquare"), loaded with '
            '--layers MODULE or CAFFEPY_LAYERS) or give the fork\'s schema with --proto') in err


def test_unknown_type_keeps_close_matches():
    with pytest.raises(NetError, match=r"unknown layer type 'Relu' \(did you mean 'ReLU'\?\); "
                                       r"closest known types: ReLU, .*--layers MODULE"):
        base.get_layer_class("Relu", "r")


def test_gradient(plugdir):
    importlib.import_module("plugtest_square")
    x = np.random.default_rng(3).standard_normal((2, 3, 4))
    layer = make_layer('type: "PlugSquare"')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, 0.5 * x * x)
    check_layer_gradient(make_layer('type: "PlugSquare"'), make_blobs([x]), make_blobs(1))


def test_a_subclass_reports_its_own_registered_type():
    """A fork layer built on a BVLC class (ConvolutionFixed on Convolution, ScaleFixed on Scale)
    is its own type: inference mode folds and exports by ``layer.type``, so a quantised
    convolution must not pass for a plain one. Aliases report their first name."""
    from caffepy.layers import base
    base.load_all()
    for name, want in [("ConvolutionFixed", "ConvolutionFixed"), ("ScaleFixed", "ScaleFixed"),
                       ("CConvolution", "CConvolution"), ("FocalLoss", "FocalLoss"),
                       ("ConvolutionDepthwise", "ConvolutionDepthwise"),
                       ("Convolution", "Convolution")]:
        assert base.get_layer_class(name).type == want, name
