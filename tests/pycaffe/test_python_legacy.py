"""A Python layer module written for Python 2, numpy < 1.24 and PyYAML < 6 runs unchanged; what it
is given stays in its own namespace."""
import sys

import numpy as np
import pytest

import caffepy
from caffepy.layers import python_legacy

LEGACY = '''
import caffe
import numpy as np
import numpy
import yaml
from helper_old import doubled


class Scaled(caffe.Layer):
    def setup(self, bottom, top):
        params = yaml.load(self.param_str)          # PyYAML 5's one-argument form
        self.k = np.float(params["k"])
        self.n = numpy.int(params["n"])

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        out = np.zeros(bottom[0].data.shape, dtype=np.float32)
        for i in xrange(self.n):
            out[i] = doubled(bottom[0].data[i]) * self.k
        top[0].data[...] = out

    def backward(self, top, propagate_down, bottom):
        pass
'''

HELPER = '''
import numpy as np


def doubled(x):
    return np.asarray(x, dtype=np.float) * 2
'''

NET = '''
input: "x" input_shape { dim: 2 dim: 3 }
layer { name: "s" type: "Python" bottom: "x" top: "y"
        python_param { module: "legacy_layer" layer: "Scaled" param_str: "{'k': 1.5, 'n': 2}" } }
'''


@pytest.fixture
def modules(tmp_path, monkeypatch):
    (tmp_path / "legacy_layer.py").write_text(LEGACY)
    (tmp_path / "helper_old.py").write_text(HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("legacy_layer", "helper_old"):
        sys.modules.pop(name, None)


def test_legacy_module_runs_and_numpy_stays_as_it_is(modules, caplog):
    pytest.importorskip("yaml")
    with caplog.at_level("INFO", logger="caffepy"):
        net = caffepy.Net(NET, caffepy.TEST)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    net.blobs["x"].data[...] = x
    np.testing.assert_allclose(net.forward()["y"], x * 2 * 1.5)
    text = caplog.text
    assert "legacy_layer" in text and "xrange" in text and "SafeLoader" in text
    if "int" not in np.__dict__:                      # numpy >= 1.24: given, not installed
        assert "np.int" in text and not hasattr(np, "float")
        assert sys.modules["helper_old"].np is not np   # the module it imported, too
    import builtins
    assert not hasattr(builtins, "xrange")            # Python 2's names: the module's only


def test_a_module_defining_the_names_keeps_its_own(tmp_path):
    import types
    m = types.ModuleType("own_names")
    m.__file__ = str(tmp_path / "own_names.py")
    m.xrange = "mine"
    exec("def f():\n    return xrange\n", m.__dict__)
    python_legacy.adapt(m)
    assert m.f() == "mine" and m.__caffepy_legacy__
    assert python_legacy.adapt(m) == []               # once per module
