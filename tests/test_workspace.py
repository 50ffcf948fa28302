"""Memory reuse: the net's shared Workspace, lazily-zero blob arrays, and convolutions
that keep no column buffer (recomputed in backward) or take the col2im data gradient instead of
the dY-column one: same numbers as the default path, on the numba and the numpy path."""
import mmap
import os

import numpy as np
import pytest

from caffepy.blob import Blob
from caffepy.math import kernels, onednn
from caffepy.math.workspace import LAZY_MIN_BYTES, Workspace, lazy_zeros
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer
from tests.layers.test_conv import CONV


def test_workspace_views_grow_and_reuse():
    ws = Workspace()
    a = ws.get("col", (3, 4), np.float32)
    assert a.shape == (3, 4) and a.flags.c_contiguous and a.dtype == np.float32
    a[...] = 7
    b = ws.get("col", (2, 5), np.float32)          # smaller: the same memory
    assert np.shares_memory(a, b) and ws.nbytes() == 48
    c = ws.get("col", (5, 5), np.float32)          # larger: grown
    assert c.shape == (5, 5) and ws.nbytes() == 100
    d = ws.get("gemm", (5, 5), np.float32)         # slots and dtypes are separate
    e = ws.get("col", (5, 5), np.float64)
    assert not np.shares_memory(c, d) and not np.shares_memory(c, e)
    assert ws.nbytes() == 100 + 100 + 200
    ws.clear()
    assert ws.nbytes() == 0


@pytest.mark.parametrize("shape", [(3,), (4, 5), (64, 64, 8), (0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lazy_zeros_is_zeros(shape, dtype):
    a = lazy_zeros(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.writeable and a.flags.c_contiguous
    assert not a.any()
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    base = base.obj if isinstance(base, memoryview) else base
    assert isinstance(base, mmap.mmap) == (a.nbytes >= LAZY_MIN_BYTES)
    a[...] = 3
    assert (a == 3).all()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_lazy_zeros_are_private_memory():
    """A forked child's writes stay in the child (copy on write), and the pages are not shared
    memory (shmem), which costs more to fault in."""
    a = lazy_zeros((1 << 16,), np.float32)
    a[:] = 1
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # child
        a[:] = 7
        os.write(w, b"%d" % int(a[0]))
        os._exit(0)
    os.close(w)
    assert os.read(r, 16) == b"7"
    os.waitpid(pid, 0)
    os.close(r)
    assert (a == 1).all()
    start = a.__array_interface__["data"][0]
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= start < hi:
                assert line.split()[1][3] == "p", line          # rw-p, not rw-s
                break
        else:
            raise AssertionError("the array's mapping is not in /proc/self/maps")


def test_blob_arrays_are_lazy_zeros_and_reshape_keeps_them():
    b = Blob((128, 256))
    assert not b.data.any() and not b.diff.any()
    b.diff[...] = 1
    b.reshape((256, 128))
    assert b.diff.shape == (256, 128) and b.diff.sum() == 256 * 128


def _run(text, x, keep=True, dy_max=None, seed=0):
    layer = make_layer(text)
    layer.keep_columns = keep
    if dy_max is not None:
        layer.dy_columns_max_bytes = dy_max
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    for i, b in enumerate(layer.blobs):
        b.data[...] = np.random.default_rng(seed + i).standard_normal(b.shape)
    layer.forward(bottom, top)
    layer._scratch("col", (4096,))[...] = np.nan      # another layer's scratch
    top[0].diff[...] = np.random.default_rng(seed + 9).standard_normal(top[0].shape)
    for b in layer.blobs:
        b.diff[...] = 0
    layer.backward(top, [True], bottom)
    return [top[0].data.copy(), bottom[0].diff.copy()] + [b.diff.copy() for b in layer.blobs]


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("shape,fields,num_output", [
    ((2, 3, 7, 6), "kernel_size: 3 pad: 1", 6),            # data gradient by dY columns
    ((2, 4, 9, 8), "kernel_size: 3 dilation: 2 pad: 2 stride: 2 group: 2", 4),
    ((1, 4, 5, 5), "kernel_size: 1", 3),                   # one image: x is the column buffer
    ((3, 4, 5, 5), "kernel_size: 1", 3),
])
def test_recomputed_columns_and_col2im_gradient_equal_default(numba, shape, fields, num_output):
    if numba and not kernels.available():
        pytest.skip("numba not installed or off")
    x = np.random.default_rng(3).standard_normal(shape)
    text = CONV % (num_output, fields)
    with (kernels.disabled() if not numba else _nothing()):
        ref = _run(text, x)
        for keep, dy_max in ((False, None), (True, 0), (False, 0)):
            got = _run(text, x, keep, dy_max)
            for a, b in zip(got, ref):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


NET = """name: "ws"
layer { name: "data" type: "DummyData" top: "data" top: "label" dummy_data_param {
  data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 }
  shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "c2" type: "Convolution" bottom: "c1" top: "c2" param { lr_mult: 0 }
  param { lr_mult: 1 } convolution_param { num_output: 4 kernel_size: 3
  weight_filler { type: "xavier" } } }
layer { name: "ip" type: "InnerProduct" bottom: "c2" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


@pytest.mark.parametrize("dnnl", [False, True])
def test_net_shares_one_workspace_and_keeps_columns_only_for_weight_gradients(dnnl, monkeypatch):
    """GEMM path: c1 keeps its columns; oneDNN (where installed): c1 runs through it, no columns
    (its few channels too, which the layer would otherwise leave to the GEMM path)."""
    if dnnl and not onednn.available():
        pytest.skip("oneDNN is not installed or CAFFEPY_ONEDNN=0")
    from caffepy.layers import conv_onednn
    monkeypatch.setattr(conv_onednn, "MIN_CHANNEL_EFFICIENCY", 0.0)
    onednn.set_enabled(dnnl)
    try:
        _workspace_and_columns(dnnl)
    finally:
        onednn.set_enabled(None)


def _workspace_and_columns(dnnl):
    param = caffe_pb2.NetParameter()
    from google.protobuf import text_format
    text_format.Parse(NET, param)
    net = Net(param, caffe_pb2.TRAIN)
    c1, c2 = net.layer_dict["c1"], net.layer_dict["c2"]
    assert c1.workspace is c2.workspace is not None
    assert c1.keep_columns and not c2.keep_columns          # c2's weights do not learn
    net.forward_backward()
    assert bool(c1._cols) != dnnl and not c2._cols
    assert bool(getattr(c1, "_dnnl_plans", None)) == dnnl
    grads = [p.diff.copy() for p in net.learnable_params]
    deploy = caffe_pb2.NetParameter()
    deploy.CopyFrom(param)
    del deploy.layer[-1]                                    # no loss: no backward
    test = Net(deploy, caffe_pb2.TEST)
    assert not test.layer_dict["c1"].keep_columns
    test.forward()
    assert not test.layer_dict["c1"]._cols
    # a second step gives the same gradients (nothing stale in the shared scratch)
    net.clear_param_diffs()
    net.layer_dict["data"].forward = lambda bottom, top: 0.0      # the same batch again
    net.forward_backward()
    for a, p in zip(grads, net.learnable_params):
        np.testing.assert_allclose(p.diff, a, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scipy_blas", [True, False])
def test_gemm_accumulate_sums_into_out_for_every_operand_layout(dtype, scipy_blas, monkeypatch):
    from caffepy.math import cpu
    if not scipy_blas:
        monkeypatch.setitem(cpu._BLAS, np.dtype(dtype), None)
    rng = np.random.default_rng(5)
    for m, k, n in ((3, 4, 5), (7, 1, 2)):
        a0, b0 = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        for a in (a0, np.asfortranarray(a0), a0.T.copy().T):
            for b in (b0, np.asfortranarray(b0), np.repeat(b0, 2, axis=1)[:, ::2]):
                out = rng.standard_normal((m, n)).astype(dtype)
                ref = out + a0.astype(np.float64) @ b0
                assert cpu.gemm_accumulate(a, b, out) is out
                np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
