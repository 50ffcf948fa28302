"""Training's Winograd F(2x2, 3x3) convolutions (caffepy.layers.conv_winograd) against the path
the layer takes without them (oneDNN's direct kernels or im2col + GEMM, float32 both): top,
data gradient, weight and bias gradients, for
paddings 0-2, odd and even planes (edge tiles cut), several bottoms sharing the weights, in
chunks of images, gradients accumulated onto existing diffs; and which layers take it."""
import numpy as np
import pytest

from caffepy import Net
from caffepy.layers import conv_winograd
from caffepy.math import kernels

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba not installed or off")


def _net(c, m, h, w, pad, n=2, bottoms=1, bias=True, phase="TRAIN", kernel=3, stride=1,
         force=True):
    inputs = "".join('layer { name: "x%d" type: "Input" top: "x%d" input_param { shape { '
                     'dim: %d dim: %d dim: %d dim: %d } } }\n' % (i, i, n, c, h, w)
                     for i in range(bottoms))
    conv = ('layer { name: "conv" type: "Convolution" %s %s convolution_param { num_output: %d '
            'kernel_size: %d pad: %d stride: %d bias_term: %s weight_filler { type: "gaussian" '
            'std: 0.1 } bias_filler { type: "gaussian" std: 0.1 } } }\n' % (
                " ".join('bottom: "x%d"' % i for i in range(bottoms)),
                " ".join('top: "y%d"' % i for i in range(bottoms)), m, kernel, pad, stride,
                "true" if bias else "false"))
    return 'name: "w" force_backward: %s state { phase: %s }\n%s%s' % (
        "true" if force else "false", phase, inputs, conv)


def _run(text, seed, off=False, monkeypatch=None):
    import tempfile
    import os
    if off:
        monkeypatch.setenv(conv_winograd.ENV, "0")
    else:
        monkeypatch.delenv(conv_winograd.ENV, raising=False)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "net.prototxt")
        with open(path, "w") as f:
            f.write(text)
        net = Net(path, phase=None)
    rng = np.random.default_rng(seed)
    conv = net.layer_dict["conv"]
    for blob in conv.blobs:
        blob.data[...] = rng.standard_normal(blob.shape).astype(np.float32) * 0.2
        blob.diff[...] = rng.standard_normal(blob.shape).astype(np.float32)   # accumulated onto
    tops = [t for t in net.top_names["conv"]]
    bottoms = net.bottom_names["conv"]
    for b in bottoms:
        net.blobs[b].data[...] = rng.standard_normal(net.blobs[b].shape)
    taken = conv_winograd.eligible(conv)
    net.forward()
    net.backward(**{t: rng.standard_normal(net.blobs[t].shape) for t in tops})
    out = [net.blobs[t].data.copy() for t in tops] + [net.blobs[b].diff.copy() for b in bottoms]
    return out + [blob.diff.copy() for blob in conv.blobs], taken


@needs_numba
@pytest.mark.parametrize("c,m,h,w,pad,bottoms", [
    (64, 192, 14, 14, 1, 1), (96, 130, 15, 17, 1, 1), (97, 128, 17, 16, 0, 1),
    (64, 200, 13, 14, 2, 2), (128, 97, 15, 14, 1, 2)])
def test_winograd_equals_the_gemm_path(c, m, h, w, pad, bottoms, monkeypatch):
    text = _net(c, m, h, w, pad, bottoms=bottoms)
    fast, taken = _run(text, 5, monkeypatch=monkeypatch)
    slow, not_taken = _run(text, 5, off=True, monkeypatch=monkeypatch)
    assert taken and not not_taken
    names = ["top"] * bottoms + ["dx"] * bottoms + ["dW", "db"]
    for name, a, b in zip(names, fast, slow):
        scale = np.abs(b).max()
        assert np.abs(a - b).max() <= 5e-6 * scale, (name, np.abs(a - b).max() / scale)


@needs_numba
def test_images_in_several_chunks(monkeypatch):
    """A batch split into groups of images gives the same values as one group."""
    text = _net(64, 192, 14, 14, 1, n=5)
    whole, _ = _run(text, 9, monkeypatch=monkeypatch)
    monkeypatch.setattr(conv_winograd, "CHUNK", 16 * 256 * 49 * 2)    # two images a group
    split, _ = _run(text, 9, monkeypatch=monkeypatch)
    for a, b in zip(whole, split):      # the GEMMs' blocking changes with their width
        assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()


@needs_numba
@pytest.mark.parametrize("kwargs", [dict(phase="TEST", force=False), dict(c=32), dict(m=64),
                                    dict(h=12, w=12), dict(kernel=5), dict(stride=2)])
def test_which_layers_take_it(kwargs, monkeypatch):
    """Only 3x3 / stride 1 layers whose weight gradient the net runs, with enough channels and
    plane positions."""
    args = dict(c=96, m=128, h=14, w=14, pad=1)
    args.update(kwargs)
    _, taken = _run(_net(**args), 1, monkeypatch=monkeypatch)
    assert not taken
