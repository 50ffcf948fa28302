"""Inference mode (caffepy.infer.plan) against the exact path: zoo nets with random weights and
valid random BatchNorm statistics, and small nets for each rewrite."""
import os
import re

import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.math import kernels
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing.random_weights import calibrate, logit_blobs, randomize

MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models")
def _net(text_or_path, batch=None):
    if os.path.exists(str(text_or_path)):
        net = Net(text_or_path, caffe_pb2.TEST)
    else:
        param = caffe_pb2.NetParameter()
        text_format.Parse(text_or_path, param)
        net = Net(param, caffe_pb2.TEST)
    if batch is not None:
        name = net.inputs[0]
        net.blobs[name].reshape((batch,) + net.blobs[name].shape[1:])
        net.reshape()
    return net


def _compare(source, keep=(), batch=None, seed=0, tol=1e-5, engine="caffepy"):
    exact = _net(source, batch)
    randomize(exact, seed)
    calibrate(exact, keep)
    fast = _net(source, batch)
    fast.copy_trained_layers_from(exact.to_proto())
    assert fast.optimize(keep=keep, engine=engine).engine == engine
    name = exact.inputs[0]
    x = np.random.default_rng(seed + 1).standard_normal(exact.blobs[name].shape)
    want = exact.forward(blobs=list(keep), **{name: x})
    got = fast.forward(blobs=list(keep), **{name: x})
    for k in want:
        scale = np.abs(want[k]).max()
        assert scale > 0, k
        assert np.abs(got[k] - want[k]).max() <= tol * scale, k
    return exact, fast


@pytest.mark.parametrize("model", [
    "mobilenet_v1", "squeezenet1_1",
    pytest.param("resnet50", marks=pytest.mark.slow),
    pytest.param("googlenet", marks=pytest.mark.slow),
])
def test_zoo_net_outputs_match_the_exact_path(model):
    path = os.path.join(MODELS, model, "%s_deploy.prototxt" % model)
    exact, fast = _compare(path, keep=logit_blobs(Net(path, caffe_pb2.TEST)), batch=1)
    steps = len(fast._plan.steps)
    assert steps < len(exact.layers)
    assert fast._plan.bytes < sum(b.data.nbytes + b.diff.nbytes for b in exact.blobs.values())


SMALL = '''
name: "small"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 9 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "bn1" }
layer { name: "sc1" type: "Scale" bottom: "bn1" top: "bn1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "bn1" top: "r1" relu_param { negative_slope: 0.1 } }
layer { name: "dw" type: "Convolution" bottom: "r1" top: "dw"
  convolution_param { num_output: 4 group: 4 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "bn2" type: "BatchNorm" bottom: "dw" top: "dw" }
layer { name: "b2" type: "Bias" bottom: "dw" top: "dw" }
layer { name: "relu2" type: "ReLU" bottom: "dw" top: "dw" }
layer { name: "pool" type: "Pooling" bottom: "dw" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "drop" type: "Dropout" bottom: "pool" top: "drop" dropout_param { dropout_ratio: 0.3 } }
layer { name: "ip" type: "InnerProduct" bottom: "drop" top: "ip" inner_product_param { num_output: 5 } }
layer { name: "relu3" type: "ReLU" bottom: "ip" top: "ip" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip" top: "ip2" inner_product_param { num_output: 3 } }
layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }
layer { name: "branch" type: "InnerProduct" bottom: "ip" top: "side" inner_product_param { num_output: 2 } }
layer { name: "branch2" type: "InnerProduct" bottom: "ip" top: "side2" inner_product_param { num_output: 2 } }
layer { name: "sum" type: "Eltwise" bottom: "side" bottom: "side2" top: "sum" }
layer { name: "relu4" type: "ReLU" bottom: "sum" top: "sum" }
'''


@pytest.mark.parametrize("fast_kernels", [True, False])
def test_small_net_every_rewrite(fast_kernels, tmp_path):
    if fast_kernels and not kernels.available():
        pytest.skip("numba not installed")
    if fast_kernels:
        _, fast = _compare(SMALL, keep=["ip2"])
    else:
        with kernels.disabled():
            _, fast = _compare(SMALL, keep=["ip2"])
    names = [s.name for s in fast._plan.steps]
    assert names == ["data", "conv1", "dw", "pool", "ip", "ip2", "prob", "branch", "branch2",
                     "sum"]
    assert fast._plan.steps[1].layer.fused_relu == pytest.approx(0.1)
    assert fast._plan.steps[-1].layer.fused_relu == 0.0
    with pytest.raises(NetError, match="optimize mode.*folded into layer 'conv1'"):
        fast.blobs["conv1"].data
    with pytest.raises(NetError, match="not kept in optimize mode"):
        fast.blobs["pool"].data
    with pytest.raises(NetError, match="backward is not available in optimize mode"):
        fast.backward()
    assert fast.params["conv1"][0].data.shape == (4, 3, 3, 3)
    with pytest.raises(NetError, match="saving weights is not available in optimize mode"):
        fast.save(str(tmp_path / "never.caffemodel"))


def test_optimize_reshape_to_a_new_batch_and_errors():
    exact = _net(SMALL)
    randomize(exact)
    fast = _net(SMALL)
    fast.copy_trained_layers_from(exact.to_proto())
    fast.optimize(engine="caffepy")
    for net in (exact, fast):
        net.blobs["data"].reshape(5, 3, 9, 8)
        net.reshape()
    x = np.random.default_rng(3).standard_normal((5, 3, 9, 8))
    want = exact.forward(data=x)
    got = fast.forward(data=x)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
    with pytest.raises(NetError, match="unknown blob"):
        _net(SMALL).optimize(keep=["nope"])
    with pytest.raises(NetError, match="TEST-phase"):
        param = caffe_pb2.NetParameter()
        text_format.Parse(SMALL, param)
        Net(param, caffe_pb2.TRAIN).optimize()


def test_time_and_test_commands_with_optimize(tmp_path, monkeypatch, capsys):
    from caffepy import cli
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.prototxt").write_text(SMALL)
    net = _net(SMALL)
    randomize(net)
    net.save("w.caffemodel")
    capsys.readouterr()
    assert cli.main(["time", "-model", "net.prototxt", "-iterations", "2", "--optimize",
                     "--engine", "caffepy", "--weights", "w.caffemodel"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"optimize mode: 20 layers run as 10 steps, engine caffepy", err)
    assert re.search(r"\] +conv1\tforward: [\d.e+-]+ ms\.", err)
    assert "bn1\tforward" not in err and "Average Forward pass" in err
    assert cli.main(["time", "-model", "net.prototxt", "--optimize", "-phase", "TRAIN"]) == 1
    assert cli.main(["test", "-model", "net.prototxt", "-weights", "w.caffemodel",
                     "-iterations", "1", "--optimize", "--engine", "caffepy"]) == 0
    assert "prob = " in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["caffepy", "onnxruntime"])
def test_classifier_optimize_matches_exact(tmp_path, engine):
    from caffepy.pycaffe.classifier import Classifier
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    (tmp_path / "net.prototxt").write_text(SMALL.replace("dim: 2 dim: 3", "dim: 1 dim: 3"))
    net = _net(str(tmp_path / "net.prototxt"))
    randomize(net)
    net.save(str(tmp_path / "w.caffemodel"))
    images = [np.random.default_rng(i).random((12, 10, 3)).astype(np.float32) for i in range(2)]
    args = (str(tmp_path / "net.prototxt"), str(tmp_path / "w.caffemodel"))
    want = Classifier(*args, image_dims=(12, 10)).predict(images)
    clf = Classifier(*args, image_dims=(12, 10), optimize=engine)
    assert clf._plan.engine == engine
    np.testing.assert_allclose(clf.predict(images), want, rtol=1e-5, atol=1e-6)


def test_nvcaffe_batchnorm_with_scale_bias_folds():
    """NVCaffe's BatchNorm with built-in scale / bias (``scale_bias: true``) folds as
    ``scale * (x - mean) / std + bias`` into the convolution before it."""
    _compare('''name: "nv"
        layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
        layer { name: "c" type: "Convolution" bottom: "data" top: "c"
                convolution_param { num_output: 4 kernel_size: 3 } }
        layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c"
                batch_norm_param { use_global_stats: true scale_bias: true } }
        layer { name: "r" type: "ReLU" bottom: "c" top: "c" }''')


FIRE = '''
name: "fire"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 13 dim: 11 } } }
layer { name: "conv0" type: "Convolution" bottom: "data" top: "c0"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "relu0" type: "ReLU" bottom: "c0" top: "c0" }
layer { name: "dw0" type: "Convolution" bottom: "c0" top: "dw0"
  convolution_param { num_output: 16 group: 8 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "relu_dw0" type: "ReLU" bottom: "dw0" top: "dw0" relu_param { negative_slope: 0.1 } }
layer { name: "sq" type: "Convolution" bottom: "dw0" top: "sq" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "relu_sq" type: "ReLU" bottom: "sq" top: "sq" relu_param { negative_slope: 0.2 } }
layer { name: "e1" type: "Convolution" bottom: "sq" top: "e1" convolution_param { num_output: 6 kernel_size: 1 } }
layer { name: "relu_e1" type: "ReLU" bottom: "e1" top: "e1" }
layer { name: "e3" type: "Convolution" bottom: "sq" top: "e3"
  convolution_param { num_output: 5 kernel_size: 3 pad: 2 dilation: 2 bias_term: false } }
layer { name: "pb" type: "Pooling" bottom: "sq" top: "pb" pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "cat" type: "Concat" bottom: "e1" bottom: "e3" bottom: "pb" top: "cat" }
layer { name: "e1b" type: "Convolution" bottom: "cat" top: "e1b" convolution_param { num_output: 3 kernel_size: 1 } }
layer { name: "e3b" type: "Convolution" bottom: "cat" top: "e3b" convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "cat2" type: "Concat" bottom: "e1b" bottom: "e3b" top: "cat2" }
layer { name: "pool" type: "Pooling" bottom: "cat2" top: "pool" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "ave" type: "Pooling" bottom: "pool" top: "ave" pooling_param { pool: AVE kernel_size: 2 stride: 1 pad: 1 } }
layer { name: "ip" type: "InnerProduct" bottom: "ave" top: "ip" inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
'''


@pytest.mark.parametrize("batch,batch_gemm_below", [(1, 1024), (3, 1024), (3, 0)])
def test_compiled_steps_and_concat_elimination(batch, batch_gemm_below, monkeypatch):
    """Convolutions (1x1 without im2col, strided, dilated, padded; per image or one GEMM over
    the batch) write straight into their Concat's top (a depthwise one with a multiplier runs
    its layer's kernel); a Concat left with a pooled bottom still
    copies that one; the outputs match the exact path."""
    if not kernels.available():
        pytest.skip("numba not installed")
    from caffepy.infer import steps as optimize_steps
    monkeypatch.setattr(optimize_steps, "BATCH_GEMM_BELOW", batch_gemm_below)
    exact, fast = _compare(FIRE, keep=["ip"], batch=batch)
    names = [s.name for s in fast._plan.steps]
    assert names == ["data", "conv0", "dw0", "sq", "e1", "e3", "pb", "cat", "e1b", "e3b", "pool",
                     "ave", "ip", "prob"]             # cat2 is gone, cat copies only "pb"
    for blob in ("e1", "e3", "e1b", "e3b"):
        with pytest.raises(NetError, match="optimize mode.*into its channels of Concat"):
            fast.blobs[blob].data
    assert ("e3b", ["cat2"]) in fast._plan.folded
    # a new input shape through the blob alone (no net.reshape()) rebuilds the compiled steps
    x = np.random.default_rng(7).standard_normal((batch + 1, 3, 13, 11)).astype(np.float32)
    for net in (exact, fast):
        net.blobs["data"].reshape(x.shape)
    want, got = exact.forward(data=x)["prob"], fast.forward(data=x)["prob"]
    assert got.shape == (batch + 1, 5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_thread_choice_prefers_the_faster_count_and_restores_the_limit():
    from threadpoolctl import threadpool_info, threadpool_limits
    if kernels.available():
        kernels.set_threads(2)
    from caffepy.infer.threads import EXPLORE, ThreadChoice
    fixed = ThreadChoice("fixed")
    assert [fixed.pick(2, 2, True) for _ in range(10)] == [(2, 2, 1)] * 10
    auto = ThreadChoice("auto")
    assert auto.pick(1, 1) == (1, 1, 1)
    assert auto.pick(2, 2) == (2, 2, 1)         # first pass: not timed
    assert auto.pick(2, 2) == (2, 2, 1)         # then each setting once
    auto.avg = {(2, 2, 1): 0.5, (1, 1, 1): 0.1, (2, 1, 1): 0.3}     # one thread has been fastest
    picks = [auto.pick(2, 2) for _ in range(2 * EXPLORE)]
    assert picks.count((2, 1, 1)) == 1 and picks.count((2, 2, 1)) == 1    # explored in turn
    assert picks.count((1, 1, 1)) == 2 * EXPLORE - 2
    assert auto.pick(2, 2, True) == (1, 1, 2)   # a splittable batch: its setting is tried
    with pytest.raises(ValueError, match="auto.*fixed"):
        ThreadChoice("many")

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with threadpool_limits(2, user_api="blas"):
        auto = ThreadChoice("auto")
        auto.passes, auto.avg = 5, {(2, 2, 1): 0.5, (1, 1, 1): 0.1, (2, 1, 1): 0.3}
        seen = auto.run(blas_threads)
        assert set(seen) == {1} and auto.last == (1, 1, 1)
        assert set(blas_threads()) == {2}       # the limit is back after the pass
        auto.avg[(1, 1, 2)] = 0.05              # splitting the batch has been fastest
        assert auto.run(blas_threads, lambda t: (lambda: ("split", t, blas_threads()))) \
            == ("split", 2, [1] * len(seen))
        assert auto.last == (1, 1, 2) and set(blas_threads()) == {2}
        auto.passes = 10                        # not a pass that explores
        assert set(auto.run(blas_threads, lambda t: None)) == {1}     # batch not splittable


def test_max_pool_without_argmax_matches_the_exact_path_on_clipped_windows():
    """MAX pooling in optimize mode (no argmax kept) on windows clipped by padding and by the
    image's end (ceil rounding), rectangular kernels and strides."""
    net = '''name: "p"
        layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
        layer { name: "p1" type: "Pooling" bottom: "data" top: "p1" pooling_param { pool: MAX kernel_size: 3 stride: 3 pad: 2 } }
        layer { name: "p2" type: "Pooling" bottom: "data" top: "p2" pooling_param { pool: MAX kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_h: 0 pad_w: 1 } }
        layer { name: "p3" type: "Pooling" bottom: "data" top: "p3" pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 stride: 1 pad_h: 2 pad_w: 1 } }'''
    exact, fast = _net(net), _net(net)
    fast.optimize(engine="caffepy")
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want, got = exact.forward(data=x), fast.forward(data=x)
    assert want["p1"].shape == (2, 3, 2, 3) and want["p2"].shape[2:] == (3, 3)
    assert want["p3"].shape[2:] == (6, 6)           # stride 1: the flat kernel
    for k in ("p1", "p2", "p3"):
        np.testing.assert_array_equal(got[k], want[k])


GROUPED = '''
name: "grouped"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 6 dim: 11 dim: 10 } } }
layer { name: "g2" type: "Convolution" bottom: "data" top: "g2"
  convolution_param { num_output: 8 group: 2 kernel_size: 3 pad: 1 stride: 2 } }
layer { name: "r2" type: "ReLU" bottom: "g2" top: "g2" }
layer { name: "g4" type: "Convolution" bottom: "g2" top: "g4"
  convolution_param { num_output: 4 group: 4 kernel_size: 1 bias_term: false } }
layer { name: "g2b" type: "Convolution" bottom: "g2" top: "g2b"
  convolution_param { num_output: 6 group: 2 kernel_size: 3 dilation: 2 pad: 2 } }
layer { name: "cat" type: "Concat" bottom: "g4" bottom: "g2b" top: "cat" }
layer { name: "ip" type: "InnerProduct" bottom: "cat" top: "ip" inner_product_param { num_output: 3 } }
'''


def test_grouped_convolutions_are_compiled_steps():
    """Grouped (not depthwise) convolutions run as compiled steps, one GEMM per image and group
    (1x1 and 3x3, dilated, with a fused ReLU, written into a Concat's slices), on the whole
    batch and split over it; the outputs match the exact path."""
    if not kernels.available():
        pytest.skip("numba not installed")
    from caffepy.infer import shards as optimize_shards
    exact, fast = _compare(GROUPED, keep=["ip"])
    names = [s.name for s in fast._plan.steps]
    assert names == ["data", "g2", "g4", "g2b", "ip"]            # the Concat is gone
    x = np.random.default_rng(8).standard_normal((2, 6, 11, 10)).astype(np.float32)
    want = exact.forward(data=x)["ip"]
    fast.blobs["data"].data[...] = x
    optimize_shards.run_sharded(optimize_shards.segments(fast._plan, 2))
    np.testing.assert_allclose(fast.blobs["ip"].data, want, rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())


@pytest.mark.skipif(not kernels.available(), reason="numba not installed or off")
def test_c_library_element_wise_layers_run_their_numpy_formula_in_inference_mode():
    """Sigmoid / TanH / Swish / ELU compute through the C math library in the exact path; the
    plan's steps take their numpy formulas instead (a few units in the last place apart)."""
    from caffepy.infer.steps import _numpy_elementwise
    text = ('input: "data" input_shape { dim: 2 dim: 3 dim: 9 dim: 9 }\n'
            'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
            'convolution_param { num_output: 4 kernel_size: 3 } }\n'
            'layer { name: "s" type: "Sigmoid" bottom: "c" top: "s" }\n'
            'layer { name: "t" type: "TanH" bottom: "s" top: "t" }\n'
            'layer { name: "w" type: "Swish" bottom: "t" top: "w" }\n'
            'layer { name: "e" type: "ELU" bottom: "w" top: "e" }\n'
            'layer { name: "r" type: "ReLU" bottom: "e" top: "r" }\n')
    net = _net(text)
    kinds = {l.layer_param.name: _numpy_elementwise(l) for l in net.layers}
    assert kinds == {"input": False, "c": False, "s": True, "t": True, "w": True, "e": True,
                     "r": False}
    exact, fast = _compare(text, tol=1e-6)

    def refuse(*args):
        raise AssertionError("the exact path's kernel ran in inference mode")
    for layer in fast.layers:
        layer.c_forward = refuse
    x = np.random.default_rng(3).standard_normal(fast.blobs["data"].shape)
    got = fast.forward(data=x)["r"]
    want = exact.forward(data=x)["r"]
    assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max()
