"""norm_param fix_scale of the Normalize forks (AIROBOTAI/caffe-test, nian-liu/DSCLRCN,
Betterthinking/caffe, jkokkin/UberNet) on caffepy's Normalize (caffepy/layers/normalization.py)."""
import numpy as np
import pytest

from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(11)


def _norm(extra=""):
    return make_layer('type: "Normalize" norm_param { across_spatial: false channel_shared: false '
                      'scale_filler { type: "constant" value: 2 } %s }' % extra)


def test_forward_by_hand_is_unchanged():
    # one position with channels (3, 4): norm 5, scale 2 -> (1.2, 1.6)
    x = np.array([3.0, 4.0]).reshape(1, 2, 1, 1)
    for extra in ("", "fix_scale: true", "fix_scale: false"):
        (y,) = run_layer(_norm(extra), make_blobs([x]), make_blobs(1))
        np.testing.assert_allclose(y.reshape(-1), [1.2, 1.6], rtol=1e-6)


@pytest.mark.parametrize("extra, learned", [("", True), ("fix_scale: true", False),
                                            ("fix_scale: false", True)])
def test_fix_scale_sets_param_propagate_down(extra, learned):
    layer = _norm(extra)
    x = RNG.standard_normal((2, 3, 2, 2))
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    assert layer.param_propagate_down == [learned]
    top[0].diff[...] = 1.0
    layer.blobs[0].diff[...] = 0.0
    layer.backward(top, [True], bottom)
    assert bool(np.any(layer.blobs[0].diff != 0)) == learned


@pytest.mark.parametrize("extra", ["fix_scale: true", "fix_scale: false"])
def test_gradient(extra):
    layer = make_layer('type: "Normalize" norm_param { scale_filler { type: "constant" '
                       'value: 1.5 } %s }' % extra)
    check_layer_gradient(layer, make_blobs([RNG.standard_normal((2, 3, 2, 2))]), make_blobs(1))


NET = '''name: "normalize_excerpt"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 4 dim: 3 dim: 3 } } }
layer { name: "normalize" type: "Normalize" bottom: "data" top: "norm"
  norm_param { fix_scale: true scale_filler { type: "constant" value: 1 } } }
'''


def test_excerpt_summary_strict_and_lr_mult_decides_in_a_net(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "normalize.prototxt"
    path.write_text(NET)
    assert main(["summary", "--strict", str(path)]) in (0, None)
    net = Net(str(path), caffe_pb2.TRAIN)
    assert net.layers[1].param_propagate_down == [True]     # lr_mult 1, as the forks' net.cpp
    path.write_text(NET.replace('top: "norm"', 'top: "norm" param { lr_mult: 0 }'))
    assert Net(str(path), caffe_pb2.TRAIN).layers[1].param_propagate_down == [False]
