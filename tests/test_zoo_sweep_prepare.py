"""How the zoo sweep sizes a net before running it: ``shrunk``'s pixel budget over the batch, its
floor and the Interp sizes it scales (tests/zoo_prepare.py), and ``run_prepared`` trying the
shrunk copy of each full-size net first (tests/test_modelzoo.py)."""
from google.protobuf import text_format

from caffepy.proto import caffe_pb2
from tests import test_modelzoo as zoo_sweep, zoo_prepare

PYRAMID = """
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: 3 dim: 512 dim: 512 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 stride: 8 pad: 1 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
        pooling_param { pool: AVE kernel_size: 16 stride: 16 } }
layer { name: "interp" type: "Interp" bottom: "pool" top: "interp"
        interp_param { height: 64 width: 64 } }
layer { name: "cat" type: "Concat" bottom: "conv" bottom: "interp" top: "cat" }
"""

FRAMES = """
layer { name: "data" type: "DummyData" top: "data"
        dummy_data_param { shape { dim: 160 dim: 3 dim: 227 dim: 227 } } }
"""


def _net(text):
    return text_format.Parse(text, caffe_pb2.NetParameter())


def _dims(param):
    return [list(s.dim) for lp in param.layer for s in zoo_prepare._input_shapes(lp)]


def test_one_large_image_is_scaled_to_the_budget_with_the_interp_sizes():
    small = zoo_prepare.shrunk(_net(PYRAMID), 320)
    assert _dims(small) == [[1, 3, 320, 320]]
    interp = next(lp for lp in small.layer if lp.type == "Interp").interp_param
    assert (interp.height, interp.width) == (40, 40)        # 64 * 320 / 512


def test_a_batch_of_frames_counts_every_pixel_and_stops_at_the_floor():
    small = zoo_prepare.shrunk(_net(FRAMES), 320)
    assert _dims(small) == [[160, 3, zoo_prepare.MIN_SIDE, zoo_prepare.MIN_SIDE]]


def test_inputs_within_the_budget_are_left_as_declared():
    net = _net(PYRAMID.replace("dim: 512 dim: 512", "dim: 224 dim: 224"))
    assert zoo_sweep.shrunk(net, 320) is None
    assert zoo_prepare.shrunk(_net(PYRAMID), 600) is None


def test_run_prepared_runs_the_shrunk_copy_and_falls_back_to_the_declared_size(monkeypatch):
    ran = []
    real = zoo_sweep._run_phase

    def spy(param, phase, seed, build_only=False):
        ran.append((_dims(param)[0][2], build_only))
        return real(param, phase, seed, build_only)

    monkeypatch.setattr(zoo_sweep, "_run_phase", spy)
    net = _net(PYRAMID)
    assert zoo_sweep.run_prepared(net, net) is None
    assert ran == [(320, False), (320, True)]       # TEST forward, then the TRAIN build
    # the Interp left at its declared size no longer fits the shrunk map: the declared size runs
    del ran[:]
    broken = zoo_sweep.shrunk
    monkeypatch.setattr(zoo_sweep, "shrunk", lambda p, side=320: _unscaled(broken(p, side)))
    assert zoo_sweep.run_prepared(net, net) is None
    assert ran == [(320, False), (512, False), (512, True)]


def _unscaled(param):
    for lp in param.layer:
        if lp.type == "Interp":
            lp.interp_param.height = lp.interp_param.width = 64
    return param
