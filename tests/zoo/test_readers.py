"""Python data layers in ``caffepy summary`` (caffepy.zoo.readers): kept when their module imports
and their setup works, else replaced by Input layers of guessed sizes with a note, in lenient
and strict mode alike."""
import pytest

import caffepy
from caffepy.errors import CaffeError
from caffepy.zoo.summary import summarize

CONV_NET = """name: "p"
layer { name: "data" type: "Python" top: "data" top: "label" include { phase: TRAIN }
  python_param { module: "%s" layer: "Loader" param_str: "{'split': 'train'}" } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param { pool: MAX global_pooling: true } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip" inner_product_param { num_output: 5 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""

FAILING_SETUP = """import caffe


class Loader(caffe.Layer):
    def setup(self, bottom, top):
        with open("lists/train.txt") as f:      # the repository does not ship its lists
            self.names = f.read().split()

    def reshape(self, bottom, top):
        pass
"""


def _summary(tmp_path, text, **kw):
    path = tmp_path / "train.prototxt"
    path.write_text(text)
    notes = []
    rows, _ = summarize(str(path), phase=caffepy.TRAIN, notes=notes, **kw)
    return {r.name: r for r in rows}, notes


@pytest.mark.parametrize("strict", [False, True])
def test_a_python_data_layer_whose_module_is_absent_is_replaced(tmp_path, strict):
    rows, notes = _summary(tmp_path, CONV_NET % "no_such_reader_module", strict=strict)
    assert rows["data"].type == "Input"
    assert rows["data"].top_shapes == [(1, 3, 224, 224), (1,)]
    assert rows["conv"].top_shapes == [(1, 4, 111, 111)] and rows["loss"].top_shapes == [()]
    assert notes == ["layer 'data' (Python): python_param.module 'no_such_reader_module' is not "
                     "importable (No module named 'no_such_reader_module'); replaced by an Input "
                     "layer of guessed sizes (data 1 x 3 x 224 x 224, label 1): give them with "
                     "--input data=N,C,H,W --input label=N,..."]


def test_a_python_data_layer_whose_setup_fails_is_replaced(tmp_path, monkeypatch):
    (tmp_path / "failing_reader.py").write_text(FAILING_SETUP.replace(
        'open("lists/train.txt")', 'open("%s")' % (tmp_path / "lists" / "train.txt")))
    monkeypatch.syspath_prepend(str(tmp_path))
    for strict in (False, True):
        rows, notes = _summary(tmp_path, CONV_NET % "failing_reader", strict=strict)
        assert rows["data"].type == "Input" and rows["data"].top_shapes[0] == (1, 3, 224, 224)
        assert len(notes) == 1 and notes[0].startswith(
            "layer 'data' (Python): its setup failed (FileNotFoundError: [Errno 2] No such file")
        assert notes[0].endswith("give them with --input data=N,C,H,W --input label=N,...")


def test_a_python_data_layer_whose_setup_raises_ioerror_is_replaced(tmp_path, monkeypatch):
    (tmp_path / "ioerror_reader.py").write_text(FAILING_SETUP.replace(
        'with open("lists/train.txt") as f:', 'raise IOError("cannot read lists/train.txt")\n'
        '        with open("lists/train.txt") as f:'))
    monkeypatch.syspath_prepend(str(tmp_path))
    rows, notes = _summary(tmp_path, CONV_NET % "ioerror_reader")
    assert rows["data"].type == "Input"
    assert "its setup failed (OSError: cannot read lists/train.txt, ioerror_reader.py:" in notes[0]


def test_given_tops_keep_their_shapes_and_leave_the_flags(tmp_path):
    rows, notes = _summary(tmp_path, CONV_NET % "no_such_reader_module",
                           inputs={"data": (2, 1, 9, 9)})
    assert rows["data"].top_shapes == [(2, 1, 9, 9), (2,)]
    assert notes[0].endswith("(label 2): give them with --input label=N,...")
    rows, notes = _summary(tmp_path, CONV_NET % "no_such_reader_module",
                           inputs={"data": (2, 1, 9, 9), "label": (2,)})
    assert rows["data"].type == "Input" and notes == []


def test_a_python_data_layer_that_sets_up_keeps_its_shapes(tmp_path, monkeypatch):
    (tmp_path / "good_reader.py").write_text(
        "import caffe\n\n\nclass Loader(caffe.Layer):\n"
        "    def setup(self, bottom, top):\n"
        "        top[0].reshape(6, 1, 20, 20)\n        top[1].reshape(6)\n\n"
        "    def reshape(self, bottom, top):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rows, notes = _summary(tmp_path, CONV_NET % "good_reader", strict=True)
    assert rows["data"].type == "Python" and rows["data"].top_shapes == [(6, 1, 20, 20), (6,)]
    assert notes == []


def test_a_python_layer_with_bottoms_whose_module_is_absent_is_not_replaced(tmp_path):
    text = (CONV_NET % "no_such_reader_module").replace(
        'layer { name: "loss" type: "SoftmaxWithLoss"',
        'layer { name: "norm" type: "Python" bottom: "ip" top: "norm" python_param { '
        'module: "no_such_norm_module" layer: "Norm" } }\n'
        'layer { name: "loss" type: "SoftmaxWithLoss"').replace('bottom: "ip" bottom: "label"',
                                                                'bottom: "norm" bottom: "label"')
    rows, notes = _summary(tmp_path, text)
    assert rows["norm"].top_shapes == ["?"] and rows["loss"].top_shapes == ["?"]
    assert notes[0].startswith("layer 'data' (Python): python_param.module")
    assert "no_such_norm_module" in notes[1]
    with pytest.raises(CaffeError, match="no_such_norm_module"):
        _summary(tmp_path, text, strict=True)


def test_one_note_for_the_phase_shown(tmp_path):
    test_layer = ('layer { name: "data" type: "Python" top: "data" top: "label" include { phase: '
                  'TEST } python_param { module: "no_such_reader_module" layer: "Loader" '
                  'param_str: "{\'split\': \'val\'}" } }\n')
    rows, notes = _summary(tmp_path, test_layer + CONV_NET % "no_such_reader_module")
    assert rows["data"].type == "Input" and len(notes) == 1 and "'data' (Python)" in notes[0]


SHAPES_THEN_FAILS = """import caffe


class Loader(caffe.Layer):
    def setup(self, bottom, top):
        top[0].reshape(2, %s, 37, 41)
        top[1].reshape(2)
        open("%s")                               # the data set is not there

    def reshape(self, bottom, top):
        pass
"""


@pytest.mark.parametrize("strict", [False, True])
def test_a_failed_setup_that_shaped_its_tops_gives_the_input_those_shapes(tmp_path, monkeypatch,
                                                                        strict):
    (tmp_path / "shaping_reader.py").write_text(SHAPES_THEN_FAILS % (1, tmp_path / "absent"))
    monkeypatch.syspath_prepend(str(tmp_path))
    rows, notes = _summary(tmp_path, CONV_NET % "shaping_reader", strict=strict)
    assert rows["data"].type == "Input"
    assert rows["data"].top_shapes == [(2, 1, 37, 41), (2,)]
    assert rows["conv"].top_shapes == [(2, 4, 18, 20)]
    assert len(notes) == 1 and notes[0].startswith("layer 'data' (Python): its setup failed (")
    assert notes[0].endswith("after shaping its tops; replaced by an Input layer of those "
                             "shapes (data 2 x 1 x 37 x 41, label 2)")


def test_shapes_a_failed_setup_gave_that_the_net_refuses_fall_back_to_the_search(
        tmp_path, monkeypatch):
    """The label the setup shaped (2,) does not fit a net whose loss reads 3 labels a sample:
    the search gives the sizes, as for any failed setup."""
    (tmp_path / "bad_shapes_reader.py").write_text(SHAPES_THEN_FAILS % (1, tmp_path / "absent"))
    monkeypatch.syspath_prepend(str(tmp_path))
    text = (CONV_NET % "bad_shapes_reader").replace(
        'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"',
        'layer { name: "l3" type: "Reshape" bottom: "label" top: "label3" '
        'reshape_param { shape { dim: 0 dim: 3 } } }\n'
        'layer { name: "loss" type: "EuclideanLoss" bottom: "ip3" bottom: "label3"').replace(
        'inner_product_param { num_output: 5 } }',
        'inner_product_param { num_output: 3 } }\nlayer { name: "ip3" type: "Flatten" '
        'bottom: "ip" top: "ip3" }')
    rows, notes = _summary(tmp_path, text)
    assert rows["data"].type == "Input" and rows["loss"].top_shapes == [()]
    assert rows["l3"].top_shapes[0][1] == 3 and rows["data"].top_shapes[1] != (2,)
    assert not any("after shaping its tops" in n for n in notes)


def test_declared_shapes_with_a_layer_summary_cannot_build(tmp_path, monkeypatch):
    """The declared shapes are tried on the file's own layers: a layer without a class after
    them is shown as '?' once, under its own type."""
    (tmp_path / "shaping_reader2.py").write_text(SHAPES_THEN_FAILS % (1, tmp_path / "absent"))
    monkeypatch.syspath_prepend(str(tmp_path))
    text = (CONV_NET % "shaping_reader2") + (
        'layer { name: "odd" type: "NoSuchLayerType" bottom: "ip" top: "odd" }\n')
    rows, notes = _summary(tmp_path, text)
    assert rows["data"].top_shapes == [(2, 1, 37, 41), (2,)]
    assert rows["odd"].type == "NoSuchLayerType" and rows["odd"].top_shapes == ["?"]
    assert sum("after shaping its tops" in n for n in notes) == 1
    assert sum("NoSuchLayerType" in n for n in notes) == 1
