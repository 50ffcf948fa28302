import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.forks.nets import forward, train_step

T, N, CI, H, W, C = 3, 2, 2, 4, 3, 2
CONV = ('lstm_conv_param { num_output: 2 kernel_size: 3 pad: 1 '
        'weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "gaussian" std: 0.3 } }')


def _text(kind="ConvLSTM", debug="", expose=True):
    return 'type: "%s" %s %s %s' % (kind, CONV, "lstm_debug_param { %s }" % debug if debug else "",
                                    "recurrent_param { expose_hidden: true }" if expose else "")


def _inputs(expose=True, seed=0):
    rng = np.random.default_rng(seed)
    cont = np.ones((T, N))
    cont[0] = 0
    cont[2, 1] = 0
    out = [rng.standard_normal((T, N, CI, H, W)), cont]
    if expose:
        out += [rng.standard_normal((1, N, C, H, W)), rng.standard_normal((1, N, C, H, W))]
    return out


def _conv(x, w, b=None):
    """Direct 3 x 3, pad 1 correlation of x (N, Ci, H, W) with w (O, Ci, 3, 3)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:])
    for i in range(x.shape[2]):
        for j in range(x.shape[3]):
            y[:, :, i, j] = np.einsum("ncab,ocab->no", xp[:, :, i:i + 3, j:j + 3], w)
    return y if b is None else y + b[None, :, None, None]


def _reference(blobs, x, cont, h, c, relu=False, ignore_x=False, hadamard=True):
    """The fork's unrolled net, one step at a time (ConvLSTMUnit's equations)."""
    sig = lambda v: 1 / (1 + np.exp(-v))
    act = (lambda v: np.maximum(v, 0)) if relu else np.tanh
    k = 0
    if not ignore_x:
        wx, k = blobs[0], 1
    wh, b = blobs[k], blobs[k + 1]
    peep = blobs[k + 2:k + 5]
    h, c = h[0], c[0]
    hs = []
    for t in range(T):
        g = _conv(h * cont[t][:, None, None, None], wh, b)
        if not ignore_x:
            g += _conv(x[t], wx)
        if hadamard:
            for j in range(3):
                g[:, j * C:(j + 1) * C] += peep[j][None, None] * c
        i, f = sig(g[:, :C]), cont[t][:, None, None, None] * sig(g[:, C:2 * C])
        o, gg = sig(g[:, 2 * C:3 * C]), act(g[:, 3 * C:])
        c = f * c + i * gg
        h = o * act(c)
        hs.append(h)
    return np.stack(hs), h[None], c[None]


def test_lstm_fields_parse():
    lp = proto_io.read_net('layer { name: "e" type: "ConvLSTM" bottom: "x" bottom: "c" top: "h" '
                           'lstm_conv_param { num_output: 8 kernel_size: 5 pad: 2 type: "input" } '
                           'lstm_conv_param { num_output: 8 kernel_size: 3 pad: 1 type: "hidden" } '
                           'lstm_debug_param { ignore_x: true axis_hadamard: 3 '
                           'num_axes_hadamard: 2 disable_hadamard: false } }').layer[0]
    assert [p.type for p in lp.lstm_conv_param] == ["input", "hidden"]
    assert lp.lstm_debug_param.ignore_x and lp.lstm_debug_param.axis_hadamard == 3


@pytest.mark.parametrize("kind,debug", [("ConvLSTM", ""), ("ConvLSTMReLU", ""),
                                        ("ConvLSTM", "ignore_x: true"),
                                        ("ConvLSTMReLU", "disable_hadamard: true")])
def test_forward_matches_the_unrolled_equations(kind, debug):
    layer = make_layer(_text(kind, debug))
    rng = np.random.default_rng(1)
    bottoms = _inputs()
    tops = make_blobs(3)
    layer.setup(make_blobs(bottoms), tops)
    for blob in layer.blobs:                    # peepholes away from their initial ones
        blob.data[...] = rng.standard_normal(blob.shape) * 0.5
    layer.forward(make_blobs(bottoms), tops)
    ref = _reference([b.data for b in layer.blobs], *bottoms, relu=kind.endswith("ReLU"),
                     ignore_x="ignore_x" in debug, hadamard="disable" not in debug)
    for got, want in zip(tops, ref):
        np.testing.assert_allclose(got.data, want, rtol=1e-10, atol=1e-12)


def test_parameter_blobs_in_the_unrolled_order():
    layer = make_layer(_text())
    run_layer(layer, make_blobs(_inputs()), make_blobs(3))
    assert [b.shape for b in layer.blobs] == [(8, 2, 3, 3), (8, 2, 3, 3), (8,), (4, 3), (4, 3),
                                             (4, 3)]
    np.testing.assert_array_equal(layer.blobs[3].data, 1)      # Scale's default filler


@pytest.mark.slow
@pytest.mark.parametrize("kind,debug", [("ConvLSTM", ""), ("ConvLSTMReLU", "ignore_x: true")])
def test_conv_lstm_gradient(kind, debug):
    check_layer_gradient(make_layer(_text(kind, debug)), make_blobs(_inputs()), make_blobs(3),
                         check_bottom=([] if debug else [0]) + [2, 3],
                         kink_range=1e-3 if kind.endswith("ReLU") else -1)


def test_state_carries_over_without_expose_hidden():
    layer = make_layer(_text(expose=False))
    bottoms, top = make_blobs(_inputs(expose=False)), make_blobs(1)
    first = run_layer(layer, bottoms, top)[0]
    layer.forward(bottoms, top)
    # the peepholes see the last cell state of the previous forward even where cont is 0
    assert not np.allclose(first, top[0].data)
    blobs = [b.data for b in layer.blobs]
    x, cont = _inputs(expose=False)
    zero = np.zeros((1, N, C, H, W))
    h1, hT, cT = _reference(blobs, x, cont, zero, zero)
    np.testing.assert_allclose(first, h1, atol=1e-12)
    np.testing.assert_allclose(top[0].data, _reference(blobs, x, cont, hT, cT)[0], atol=1e-12)


@pytest.mark.parametrize("text,bottoms,message", [
    (_text(debug='expose: "gate_input_2"'), None, "only h_t=k and c_t=k"),
    ('type: "ConvLSTM" lstm_conv_param { num_output: 2 kernel_size: 3 }', None,
     "pad so that H x W stay"),
    (_text(expose=False), "static", "static input")])
def test_bad_configurations(text, bottoms, message):
    b = _inputs(expose=False)
    if bottoms == "static":
        b.append(np.zeros((N, 1, H, W)))
    with pytest.raises(NetError, match=message):
        run_layer(make_layer(text), make_blobs(b), make_blobs(1))


NET = """
layer { name: "data" type: "Input" top: "input" top: "seq_label"
        input_param { shape { dim: 2 dim: 4 dim: 5 dim: 5 } shape { dim: 7 dim: 2 } } }
layer { name: "slice_seq" type: "Slice" bottom: "seq_label" top: "seq_enc" top: "seq_dec"
        slice_param { axis: 0 slice_point: 4 } }
layer { name: "input_permute" type: "Permute" bottom: "input" top: "input_p"
        permute_param { order: 1 order: 0 order: 2 order: 3 } }
layer { name: "input_reshape" type: "Reshape" bottom: "input_p" top: "input_p_r"
        reshape_param { shape { dim: 4 dim: 2 dim: 1 dim: 5 dim: 5 } } }
layer { name: "dummy" type: "DummyData" top: "dummy"
        dummy_data_param { shape { dim: 1 dim: 2 dim: 3 dim: 5 dim: 5 } } }
layer { name: "encode1" type: "ConvLSTMReLU"
        bottom: "input_p_r" bottom: "seq_enc" bottom: "dummy" bottom: "dummy"
        top: "encode1" top: "encode1_h" top: "encode1_c"
        recurrent_param { expose_hidden: true }
        lstm_debug_param { axis_hadamard: 3 num_axes_hadamard: 2 }
        lstm_conv_param { num_output: 3 kernel_size: 3 pad: 1
                          weight_filler { type: "gaussian" std: 0.1 }
                          bias_filler { type: "constant" value: 0 } } }
layer { name: "input_decode1" type: "DummyData" top: "input_decode1"
        dummy_data_param { shape { dim: 3 dim: 2 dim: 1 dim: 5 dim: 5 } } }
layer { name: "decode1" type: "ConvLSTMReLU"
        bottom: "input_decode1" bottom: "seq_dec" bottom: "encode1_h" bottom: "encode1_c"
        top: "decode1" top: "decode1_h" top: "decode1_c"
        lstm_debug_param { ignore_x: true }
        recurrent_param { expose_hidden: true }
        lstm_conv_param { num_output: 3 kernel_size: 3 pad: 1
                          weight_filler { type: "gaussian" std: 0.1 }
                          bias_filler { type: "constant" value: 0.1 } } }
layer { name: "silence" type: "Silence" bottom: "encode1" bottom: "decode1_h" bottom: "decode1_c" }
layer { name: "output_conv" type: "Convolution" bottom: "decode1" top: "output"
        convolution_param { num_output: 1 kernel_size: 1 axis: 2
                            weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "flat" type: "Flatten" bottom: "output" top: "out_flat" }
layer { name: "target" type: "DummyData" top: "target"
        dummy_data_param { shape { dim: 3 dim: 50 } data_filler { type: "constant" value: 1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "out_flat" bottom: "target" top: "l2" }
"""


def test_encoder_decoder_excerpt_runs_and_trains():
    net = forward(NET, labels=2, batch=2)
    assert net.blobs["decode1"].shape == (3, 2, 3, 5, 5)
    train_step(NET, labels=2, batch=2)
