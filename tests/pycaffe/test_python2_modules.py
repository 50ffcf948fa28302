"""Python layer modules in Python 2 syntax, using scipy.misc's removed image functions or
py-faster-rcnn's unbuilt Cython helpers, run; a module that imports as it is stays untouched."""
import importlib
import os
import sys

import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.forks.detection.frcnn import compiled
from caffepy.layers import legacy_scipy_misc as misc
from caffepy.layers.legacy_import import legacy_imports

pytest.importorskip("fissix")

PY2 = '''
import caffe
import numpy as np


class Halves(caffe.Layer):
    def setup(self, bottom, top):
\tself.table = {'a': 7, 'b': 2}
        try:
            int('x')
        except ValueError, e:
            self.err = str(e)
        assert isinstance(self.err, basestring)
        self.big = long(3)
        print "setup done", self.big

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].data.shape[0], bottom[0].data.shape[1] / 2)

    def forward(self, bottom, top):
        total = 0
        for k, v in self.table.iteritems():
            total += v / 2
        m = 9
        m /= 2
        x = bottom[0].data
        out = top[0].data
        out[...] = x[:, :x.shape[1] / 2] * 2
        out /= 4
        out += total * 10 + (-7 / 2) + m + self.big - 3 + self.table.keys().index('a') * 0
        out += round(0.5) + round(-2.5) + 2          # Python 2: 1.0 - 3.0 + 2 = 0
'''

PY3 = '''
import caffe


class Plain(caffe.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data / 2 + 7 / 2
'''

SCIPY = '''
import caffe
import scipy.misc
from scipy.misc import imresize


class Resize(caffe.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(1, 4, 4)

    def forward(self, bottom, top):
        small = scipy.misc.bytescale(bottom[0].data[0])
        top[0].data[0] = imresize(small, (4, 4), interp='nearest')
'''


def _net(module, layer, shape):
    return caffepy.Net('''
input: "x" input_shape { %s }
layer { name: "p" type: "Python" bottom: "x" top: "y"
        python_param { module: "%s" layer: "%s" } }''' % (
        " ".join("dim: %d" % d for d in shape), module, layer), caffepy.TEST)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if name.startswith("frlib") or str(getattr(module, "__file__", None) or "").startswith(
                str(tmp_path)):
            sys.modules.pop(name)


def test_python2_module_runs_translated_with_classic_division(tree, caplog):
    (tree / "py2_halves.py").write_text(PY2)
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("py2_halves", "Halves", (2, 4))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    net.blobs["x"].data[...] = x
    # 7/2 + 2/2 = 4 -> 40; -7/2 = -4; 9/2 = 4; long(3) - 3 = 0; x*2/4 on floats = x/2
    np.testing.assert_allclose(net.forward()["y"], x[:, :2] / 2 + 40)
    lines = [r.getMessage() for r in caplog.records if "py2_halves" in r.getMessage()]
    assert len(lines) == 1 and "Python 2 source translated" in lines[0]
    assert "classic integer division" in lines[0]
    assert not list(tree.rglob("py2_halves*.pyc"))          # nothing written beside it


def test_python3_module_is_not_translated(tree, caplog):
    (tree / "py3_plain.py").write_text(PY3)
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("py3_plain", "Plain", (3,))
    net.blobs["x"].data[...] = [1, 2, 3]
    np.testing.assert_allclose(net.forward()["y"], [4.0, 4.5, 5.0])     # 7 / 2 == 3.5
    assert "py3_plain" not in caplog.text
    assert "__py2_div__" not in vars(sys.modules["py3_plain"])
    user = [layer for layer in net.layers if layer.type == "Python"][0].py_layer
    assert user.phase == caffepy.TEST and str(user.phase) == "TEST"     # cfg[str(self.phase)]


PY2_COMPILES = '''
import random
import caffe


class Subset(caffe.Layer):
    def reshape(self, bottom, top):
        n = bottom[0].data.size / bottom[0].data.shape[0]
        self.keep = random.sample(xrange(n), n / 2)
        top[0].reshape(bottom[0].data.shape[0], n / 2)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data.reshape(len(bottom[0].data), -1)[:, sorted(self.keep)]
'''

PY3_SHIM = '''
import caffe
try:
    xrange
except NameError:
    xrange = range


class Shim(caffe.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(len(list(xrange(3))))

    def forward(self, bottom, top):
        top[0].data[...] = 7 / 2
'''


def test_python2_module_that_compiles_is_translated_when_it_reads_xrange(tree, caplog):
    """A Python 2 module valid as Python 3 text (no print statement), which reads ``xrange``:
    run translated, so its ``n / 2`` of integers is Python 2's (a shape, not a float)."""
    (tree / "ext_subset2.py").write_text(PY2_COMPILES)
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("ext_subset2", "Subset", (2, 3, 3))
    assert net.blobs["y"].shape == (2, 4)
    lines = [r.getMessage() for r in caplog.records if "ext_subset2" in r.getMessage()]
    assert len(lines) == 1 and "Python 2 builtins read (xrange)" in lines[0]
    assert "classic integer division" in lines[0]
    assert not list(tree.rglob("ext_subset2*.pyc"))


ANCHORS = """
def anchors(n):
    return [i / 2 for i in range(n)]
"""

IMPLICIT_RELATIVE = """
import caffe
from anchors_of_rpn import anchors


class Anchors(caffe.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(len(anchors(4)))

    def forward(self, bottom, top):
        top[0].data[...] = anchors(4)
"""


def test_a_package_module_importing_its_sibling_implicitly_runs_translated(tree, caplog):
    """py-faster-rcnn's ``rpn/anchor_target_layer.py`` imports ``generate_anchors`` beside it
    without a dot (Python 2's implicit relative import), and its other lines compile as Python 3:
    it is read as the Python 2 it is, so the import finds the sibling."""
    (tree / "rpnpkg").mkdir()
    (tree / "rpnpkg" / "__init__.py").write_text("")
    (tree / "rpnpkg" / "anchors_of_rpn.py").write_text(ANCHORS)
    (tree / "rpnpkg" / "anchor_layer.py").write_text(IMPLICIT_RELATIVE)
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("rpnpkg.anchor_layer", "Anchors", (1,))
    np.testing.assert_array_equal(net.forward()["y"], [0, 0.5, 1, 1.5])  # the sibling compiles
    lines = [r.getMessage() for r in caplog.records if "rpnpkg.anchor_layer" in r.getMessage()]
    assert len(lines) == 1 and "implicit relative imports (anchors_of_rpn)" in lines[0]


def test_a_top_level_module_importing_a_module_beside_it_is_not_translated(tree, caplog):
    (tree / "anchors_of_rpn2.py").write_text(ANCHORS)
    (tree / "top_anchor_layer.py").write_text(IMPLICIT_RELATIVE.replace("anchors_of_rpn",
                                                                        "anchors_of_rpn2"))
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("top_anchor_layer", "Anchors", (1,))
    np.testing.assert_array_equal(net.forward()["y"], [0, 0.5, 1, 1.5])
    assert "top_anchor_layer" not in caplog.text


def test_python3_module_binding_xrange_itself_is_not_translated(tree, caplog):
    (tree / "py3_shim.py").write_text(PY3_SHIM)
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("py3_shim", "Shim", (1,))
    np.testing.assert_allclose(net.forward()["y"], [3.5, 3.5, 3.5])
    assert "py3_shim" not in caplog.text


def test_source_neither_python_3_nor_2_reports_its_own_syntax_error(tree):
    (tree / "broken_layer.py").write_text("import caffe\n\n\ndef f(:\n    pass\n")
    with pytest.raises(NetError, match=r"SyntaxError in import.*broken_layer.py:4"):
        _net("broken_layer", "Any", (1,))


def test_classic_division_floors_integers_only():
    from caffepy.layers.python2_source import classic_div, classic_idiv
    np.testing.assert_array_equal(classic_div(np.array([5, -7]), 2), [2, -4])
    assert classic_div(np.int32(7), 2) == 3 and classic_div(-7, 2) == -4
    assert classic_div(7, 2.0) == 3.5 and classic_div(np.array([7.0]), 2)[0] == 3.5
    a = np.array([1.0, 2.0])
    view = a
    assert classic_idiv(a, 2) is a and view.tolist() == [0.5, 1.0]      # in place, as a /= 2
    n = np.array([7, 9])
    assert classic_idiv(n, 2) is n and n.tolist() == [3, 4]


def test_round_as_python_2():
    from caffepy.layers.python2_source import classic_round
    assert classic_round(2.5) == 3.0 and classic_round(-0.5) == -1.0
    assert isinstance(classic_round(np.float32(1.25)), float) and classic_round(3) == 3.0
    assert classic_round(2.675, 2) == 2.67                  # the double is 2.67499999...
    assert classic_round(1250, -2) == 1300.0 and classic_round(0.125, 2) == 0.13


def test_tabs_count_to_the_next_multiple_of_eight(tree):
    from caffepy.layers.python2_source import expand_indentation_tabs
    text = 'def f():\n  \tx = """a\n\tb"""\n        return x\n'
    assert expand_indentation_tabs(text) == 'def f():\n        x = """a\n\tb"""\n        return x\n'


def test_scipy_misc_functions_given_to_the_module_only(tree, caplog):
    pytest.importorskip("PIL")
    (tree / "old_scipy.py").write_text(SCIPY)
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("old_scipy", "Resize", (1, 2, 2))
    net.blobs["x"].data[...] = [[[0, 1], [2, 3]]]
    # bytescale: 255 / 3 = 85 per step; nearest doubling repeats each pixel 2 x 2
    expected = np.kron([[0, 85], [170, 255]], np.ones((2, 2)))
    np.testing.assert_array_equal(net.forward()["y"][0], expected)
    assert "scipy.misc.imresize, scipy.misc.bytescale (Pillow)" in caplog.text
    import scipy.misc
    assert getattr(scipy.misc, "imresize", None) is not misc.imresize    # scipy's own is as it was


def test_bytescale_as_scipy_1_2():
    data = np.array([[0, 5], [10, 20]], dtype=np.float64)
    # scale 255 / 20 = 12.75: 63.75 + 0.5 -> 64, 127.5 + 0.5 -> 128
    np.testing.assert_array_equal(misc.bytescale(data), [[0, 64], [128, 255]])
    np.testing.assert_array_equal(misc.bytescale(data, cmin=0, cmax=10, high=100),
                                  [[0, 50], [100, 100]])
    u8 = np.array([[3, 9]], dtype=np.uint8)
    assert misc.bytescale(u8) is u8


def test_imresize_sizes_interpolations_and_modes():
    pytest.importorskip("PIL")
    img = np.array([[0, 100], [200, 50]], dtype=np.uint8)       # uint8: not rescaled
    out = misc.imresize(img, (4, 4), interp="nearest")
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, np.kron(img, np.ones((2, 2), dtype=np.uint8)))
    wide = np.zeros((4, 6), dtype=np.uint8)
    assert misc.imresize(wide, 50).shape == (2, 3)                # int: percent
    assert misc.imresize(wide, 0.5).shape == (2, 3)               # float: fraction
    assert misc.imresize(wide, (3, 5)).shape == (3, 5)            # (height, width)
    flat = np.full((4, 4), 77, dtype=np.uint8)
    for interp in ("bilinear", "bicubic", "cubic", "lanczos"):
        np.testing.assert_array_equal(misc.imresize(flat, (3, 5), interp=interp), 77)
    f = np.array([[0.25, -1.5], [3.0, 8.0]])
    out = misc.imresize(f, 200, interp="nearest", mode="F")       # 'F': float values kept
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.kron(f, np.ones((2, 2))))
    rgb = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    np.testing.assert_array_equal(misc.imresize(rgb, (4, 4), interp="nearest")[::2, ::2], rgb)


def test_bbox_overlaps_as_the_cython_code():
    boxes = np.array([[0, 0, 9, 9]], dtype=np.float64)
    query = np.array([[0, 0, 9, 9], [5, 5, 14, 14], [20, 20, 30, 30]], dtype=np.float64)
    # +1 in widths: areas 100; the second overlaps 5 x 5 = 25 of 100 + 100 - 25
    np.testing.assert_allclose(compiled.bbox_overlaps(boxes, query), [[1.0, 25 / 175, 0.0]])
    with pytest.raises(ValueError, match="dtype mismatch"):
        compiled.bbox_overlaps(boxes.astype(np.float32), query)


def test_nms_keeps_in_score_order_and_compares_as_cpu_and_gpu_code():
    dets = np.array([[20, 20, 29, 29, 0.7],     # 0: C, alone
                     [0, 0, 9, 9, 0.9],         # 1: A
                     [0, 0, 9, 4, 0.6],         # 2: E, overlap with A exactly 50 / 100
                     [1, 1, 10, 10, 0.8]],      # 3: B, overlap with A 81 / 119
                    dtype=np.float32)
    assert compiled.cpu_nms(dets, 0.5) == [1, 0]               # >= 0.5 suppresses E
    assert compiled.nms(dets, 0.7) == [1, 3, 0, 2]
    assert [int(i) for i in compiled.gpu_nms(dets, 0.5)] == [1, 0, 2]   # > 0.5 keeps E
    with pytest.raises(ValueError, match="dtype mismatch"):
        compiled.cpu_nms(dets.astype(np.float64), 0.5)


def test_unbuilt_extension_gets_the_stand_in_and_a_built_one_wins(tree, caplog):
    for d in ("frlib", "frlib/utils", "frlib/nms"):
        (tree / d).mkdir()
        (tree / d / "__init__.py").write_text("")
    (tree / "frlib/nms/cpu_nms.pyx").write_text("# never built\n")
    (tree / "frlib/nms/gpu_nms.py").write_text("def gpu_nms(dets, thresh, device_id=0):\n"
                                                "    return 'the real one'\n")
    with caplog.at_level("WARNING", logger="caffepy"), legacy_imports():
        bbox = importlib.import_module("frlib.utils.cython_bbox")
        cpu = importlib.import_module("frlib.nms.cpu_nms")
        gpu = importlib.import_module("frlib.nms.gpu_nms")
    assert bbox.bbox_overlaps is compiled.bbox_overlaps and cpu.cpu_nms is compiled.cpu_nms
    assert gpu.gpu_nms(None, 0) == "the real one"
    assert "frlib.nms.cpu_nms" in caplog.text and "frlib.nms.gpu_nms" not in caplog.text
    with pytest.raises(ImportError):
        importlib.import_module("frlib.utils.cython_nms")      # outside caffepy's imports


def test_translation_keeps_no_grammar_pickle(tmp_path):
    """fissix's grammar tables are built in memory: nothing is written under the cache directory
    (and no pickle is read back from it)."""
    import subprocess
    code = ("from caffepy.layers import python2_source as p\n"
            "print(p.translate('print 7 / 2\\n', 'm.py'))\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(caffepy.__file__)), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "print(7 / 2)" in out.stdout
    assert not [p for p in tmp_path.rglob("*") if p.suffix == ".pickle"]


HALF_ROWS = '''
import caffe


class HalfRows(caffe.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].data.shape[0] / 2)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data[:bottom[0].data.shape[0] / 2]
'''


def test_a_module_beside_python_2_source_runs_as_python_2(tree, caplog):
    (tree / "rows_layer.py").write_text(HALF_ROWS)          # compiles under Python 3
    (tree / "a_loader.py").write_text('print "reading"\n')   # Python 2 only
    (tree / "z_broken.py").write_text("def (:\n")            # neither
    with caplog.at_level("WARNING", logger="caffepy"):
        net = _net("rows_layer", "HalfRows", (5,))
    net.blobs["x"].data[...] = np.arange(5)
    np.testing.assert_array_equal(net.forward()["y"], [0, 1])           # 5 / 2 == 2
    line = [r.getMessage() for r in caplog.records if "rows_layer" in r.getMessage()]
    assert len(line) == 1 and "Python 2 source beside it (a_loader.py)" in line[0]


def test_a_module_beside_no_python_2_source_runs_as_python_3(tree):
    (tree / "rows_layer3.py").write_text(HALF_ROWS)
    (tree / "z_broken.py").write_text("def (:\n")            # not Python 2 either
    with pytest.raises(NetError, match="rows_layer3"):
        _net("rows_layer3", "HalfRows", (5,))                # reshape(2.5) fails
