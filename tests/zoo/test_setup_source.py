"""The top shapes a Python data layer's setup writes as literals, read from its source
(caffepy.zoo.setup_source), and their use in ``caffepy summary`` when the module does not import."""
import pytest

import caffepy
from caffepy.zoo.setup_source import module_file, setup_shapes
from caffepy.zoo.summary import summarize

NEEDS_A_PACKAGE = """import caffe
import a_package_nobody_installed        # the repository's reader needs it


class Loader(caffe.Layer):
    def setup(self, bottom, top):
        self.data = a_package_nobody_installed.open("train.csv")
        idx = 0
        top[idx].reshape(2, 1, 37, 41)
        idx += 1
        top[idx].reshape(2)

    def reshape(self, bottom, top):
        pass
"""

PYTHON2_LITERAL_INDICES = """import caffe


class Loader(caffe.Layer):
    def setup(self, bottom, top):
        print "loading"
        top[1].reshape((4,))
        top[0].reshape([4, 3, 16, 16])
        top[0].reshape(1, 1, 1, 1)             # a second call for a top: the first counts


class Other(caffe.Layer):
    def setup(self, bottom, top):
        top[0].reshape(self.batch, 3, 16, 16)  # a size from a variable: nothing to read
        top[1].reshape(4)
"""


def test_literal_reshapes_in_setup_give_the_top_shapes(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "reader.py").write_text(NEEDS_A_PACKAGE)
    (tmp_path / "py2reader.py").write_text(PYTHON2_LITERAL_INDICES)
    path = [str(tmp_path)]
    assert module_file("pkg.reader", path) == str(tmp_path / "pkg" / "reader.py")
    assert module_file("pkg", path) == str(tmp_path / "pkg" / "__init__.py")
    assert module_file("absent", path) is None and module_file("../x", path) is None
    assert setup_shapes("pkg.reader", "Loader", 2, path) == [(2, 1, 37, 41), (2,)]
    assert setup_shapes("pkg.reader", "Loader", 3, path) is None     # a counter: one call a top
    assert setup_shapes("py2reader", "Loader", 2, path) == [(4, 3, 16, 16), (4,)]
    assert setup_shapes("py2reader", "Loader", 3, path) is None      # top 2 never reshaped
    assert setup_shapes("py2reader", "Other", 2, path) is None
    assert setup_shapes("py2reader", "Missing", 2, path) is None


NET = """name: "p"
layer { name: "data" type: "Python" top: "data" top: "label" include { phase: TRAIN }
  python_param { module: "reader_needing_a_package" layer: "Loader" } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "r" type: "Reshape" bottom: "ip" top: "r" reshape_param { shape { dim: 2 dim: 4 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "r" bottom: "label" top: "loss" }
"""


@pytest.mark.parametrize("strict", [False, True])
def test_summary_takes_the_shapes_a_module_that_does_not_import_writes(tmp_path, monkeypatch,
                                                                        strict):
    (tmp_path / "reader_needing_a_package.py").write_text(NEEDS_A_PACKAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "train.prototxt"
    path.write_text(NET)
    notes = []
    rows, _ = summarize(str(path), phase=caffepy.TRAIN, notes=notes, strict=strict)
    rows = {r.name: r for r in rows}
    assert rows["data"].type == "Input" and rows["data"].top_shapes == [(2, 1, 37, 41), (2,)]
    assert rows["r"].top_shapes == [(2, 4)] and rows["loss"].top_shapes == [()]
    assert notes == ["layer 'data' (Python): python_param.module 'reader_needing_a_package' is "
                     "not importable (No module named 'a_package_nobody_installed'); its setup's "
                     "source writes its tops' shapes; replaced by an Input layer of those shapes "
                     "(data 2 x 1 x 37 x 41, label 2)"]
