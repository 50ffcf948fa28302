"""``caffepy summary`` / ``Net`` from shapes alone: no weights allocated or filled, a bad geometry
reported before any parameter memory is taken, a training-only file shown in its phase, and an
unimportable Python data layer replaced by Input layers."""
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

import caffepy
from caffepy.blob import ShapeBlob
from caffepy.errors import CaffeError
from caffepy.layers.base import shapes_only
from caffepy.net.passes import PhaseError
from caffepy.zoo.summary import summarize

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VGG16 = os.path.join(REPO, "models", "vgg16", "vgg16_deploy.prototxt")

TRAIN_ONLY = """name: "t"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  data_param { source: "x_lmdb" batch_size: 8 } transform_param { crop_size: 12 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 5 } }
layer { name: "ip" type: "InnerProduct" bottom: "conv1" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""

PY_DATA = """name: "p"
layer { name: "data" type: "Python" top: "data" top: "label"
  python_param { module: "no_such_datalayers_module" layer: "Loader" } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SigmoidCrossEntropyLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def test_vgg16_summary_from_shapes_is_fast_and_small():
    summarize(VGG16)                                  # imports and layer registry, once
    tracemalloc.start()
    start = time.perf_counter()
    try:
        rows, total = summarize(VGG16)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total.params == 138357544                 # VGG16's published parameter count
    assert {r.name: r.top_shapes for r in rows}["fc8"] == [(1, 1000)]
    assert peak < 8e6, peak                           # weights alone would be 553 MB
    assert seconds < 1.0, seconds


def test_shapes_only_net_holds_no_arrays():
    with shapes_only():
        net = caffepy.Net(VGG16, caffepy.TEST)
    blobs = list(net.blobs.values()) + [b for v in net.params.values() for b in v]
    assert all(isinstance(b, ShapeBlob) and not b.allocated for b in blobs)
    assert net.params["conv1_1"][0].shape == (64, 3, 3, 3) and net.blobs["fc7"].count == 4096
    assert net.params["fc6"][0].data.shape == (4096, 25088)   # allocated (zeros) when used


def test_bad_geometry_fails_before_parameters_are_allocated(tmp_path):
    with open(VGG16) as f:
        text = f.read().replace("kernel_size: 3", "kernel_size: 999", 1)
    bad = tmp_path / "bad.prototxt"
    bad.write_text(text)
    for build in (lambda: caffepy.Net(str(bad), caffepy.TEST), lambda: summarize(str(bad))):
        tracemalloc.start()
        try:
            with pytest.raises(CaffeError, match=r"bad.prototxt:\d+: layer 'conv1_1' "
                                                 r"\(Convolution\): output spatial shape"):
                build()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8e6, peak                       # 64 x 3 x 999 x 999 floats: 766 MB


def test_declared_params_fill_in_todays_order():
    """Parameters are filled after the layer's reshape, drawing the same numbers as before."""
    net_text = """input: "x" input_shape { dim: 2 dim: 3 dim: 6 dim: 6 }
layer { name: "c" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 2
  kernel_size: 3 weight_filler { type: "gaussian" std: 1 } bias_filler { type: "uniform" } } }
layer { name: "i" type: "InnerProduct" bottom: "c" top: "i" inner_product_param { num_output: 2
  weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }"""
    caffepy.set_random_seed(3)
    net = caffepy.Net(net_text, caffepy.TRAIN)
    rng = np.random.default_rng(3)
    expect = [rng.normal(0, 1, (2, 3, 3, 3)), rng.uniform(0, 1, (2,))]
    scale = np.sqrt(3.0 / 32)
    expect += [rng.uniform(-scale, scale, (2, 32)), rng.normal(0, 1, (2,))]
    got = [net.params["c"][0].data, net.params["c"][1].data, net.params["i"][0].data,
           net.params["i"][1].data]
    for a, b in zip(got, expect):
        assert type(a) is np.ndarray and np.allclose(a, b.astype(np.float32))
    assert not any(isinstance(b, ShapeBlob) for v in net.params.values() for b in v)


def test_training_only_file(tmp_path):
    path = tmp_path / "train.prototxt"
    path.write_text(TRAIN_ONLY)
    with pytest.raises(PhaseError, match=r"train.prototxt:\d+: layer 'conv1' \(Convolution\): "
                                         r"bottom blob 'data' is produced only in phase TRAIN "
                                         r"\(by layer 'mnist'\); build the net in phase TRAIN"):
        caffepy.Net(str(path), caffepy.TEST)
    notes = []
    rows, total = summarize(str(path), notes=notes)
    assert notes == ["phase TEST cannot be built (its data layers are in phase TRAIN); showing "
                     "phase TRAIN"]
    assert rows[0].top_shapes == [(8, 3, 12, 12), (8,)] and rows[-1].type == "SoftmaxWithLoss"
    out = subprocess.run([sys.executable, "-m", "caffepy", "summary", str(path)], timeout=60,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REPO))
    assert out.returncode == 0 and "showing phase TRAIN" in out.stderr and "conv1" in out.stdout


STAGED_MIDDLE = """
layer { name: "train_data" type: "DummyData" top: "data" include { phase: TRAIN }
        dummy_data_param { shape { dim: 4 dim: 6 } } }
layer { name: "val_data" type: "DummyData" top: "data"
        include { phase: TEST stage: "test-on-val" }
        dummy_data_param { shape { dim: 4 dim: 6 } } }
layer { name: "plain" type: "InnerProduct" bottom: "data" top: "feat"
        include { stage: "unfactored" } inner_product_param { num_output: 5 } }
layer { name: "split" type: "InnerProduct" bottom: "data" top: "feat" include { stage: "factored" }
        inner_product_param { num_output: 5 } }
layer { name: "out" type: "InnerProduct" bottom: "feat" top: "out"
        inner_product_param { num_output: 2 } }
"""


def test_a_phase_that_itself_needs_a_stage_is_followed_to_it():
    """COCO captioning's LRCN net: phase TEST has its data only under stages, phase TRAIN has its
    data but the recurrent layers only under a stage; summary follows TEST -> TRAIN -> TRAIN with
    the first stage that builds, in one note."""
    notes = []
    rows, _ = summarize(STAGED_MIDDLE, notes=notes)
    assert notes == ["the net cannot be built without a stage (layers it needs are given to "
                     "stages); showing phase TRAIN with stage unfactored"]
    assert [r.name for r in rows] == ["train_data", "plain", "out"]


def test_unimportable_python_data_layer_is_replaced(tmp_path):
    path = tmp_path / "py.prototxt"
    path.write_text(PY_DATA)
    notes = []
    rows, _ = summarize(str(path), notes=notes)
    assert rows[0].type == "Input" and rows[0].top_shapes == [(1, 3, 224, 224), (1, 3)]
    assert notes[0].startswith("layer 'data' (Python): python_param.module "
                               "'no_such_datalayers_module' is not importable")
    rows, _ = summarize(str(path), inputs={"data": (2, 3, 5, 5), "label": (2, 3)})
    assert rows[0].type == "Input" and rows[0].top_shapes == [(2, 3, 5, 5), (2, 3)]
    assert rows[1].params == 3 * 75 + 3


def test_importable_python_data_layer_sets_its_shapes(tmp_path, monkeypatch):
    (tmp_path / "own_datalayers.py").write_text(
        "import caffe\n\n\nclass Loader(caffe.Layer):\n"
        "    def setup(self, bottom, top):\n"
        "        top[0].reshape(4, 3, 7, 7)\n"
        "        top[1].reshape(4, 3)\n\n"
        "    def reshape(self, bottom, top):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "py.prototxt"
    path.write_text(PY_DATA.replace("no_such_datalayers_module", "own_datalayers"))
    rows, _ = summarize(str(path))
    assert rows[0].type == "Python" and rows[0].top_shapes == [(4, 3, 7, 7), (4, 3)]
