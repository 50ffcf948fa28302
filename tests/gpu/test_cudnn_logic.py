"""The cuDNN binding's plain-Python parts, without a GPU: where the library is looked for, the
engine switch, the algorithm choice, the ctypes layout, and the fallback to im2col."""
import ctypes

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.gpu import cudnn


def test_candidates_env_file_then_wheel_then_system(tmp_path):
    lib = tmp_path / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    for name in ("libcudnn.so.9", "libcudnn.so.8", "libcudnn_ops.so.9"):
        (lib / name).write_bytes(b"")
    cands = cudnn.candidate_paths(environ={"CAFFEPY_CUDNN_LIBRARY": "/opt/x/libcudnn.so.9"},
                                  search_paths=[str(tmp_path)], find_library=lambda n: None)
    assert cands[0] == "/opt/x/libcudnn.so.9"
    assert cands[1:3] == [str(lib / "libcudnn.so.9"), str(lib / "libcudnn.so.8")]
    assert cands[3:] == list(cudnn.SYSTEM_NAMES)
    assert not any("_ops" in c for c in cands)


@pytest.mark.parametrize("raw, want", [("", "auto"), ("auto", "auto"), ("1", "on"), ("ON", "on"),
                                       ("0", "off"), ("false", "off")])
def test_mode_from_environment(raw, want):
    assert cudnn.mode({"CAFFEPY_CUDNN": raw}) == want


def test_mode_rejects_other_values_in_one_line():
    with pytest.raises(CaffeError, match="CAFFEPY_CUDNN='maybe'"):
        cudnn.mode({"CAFFEPY_CUDNN": "maybe"})


@pytest.mark.parametrize("env, engine, want", [
    ("auto", cudnn.ENGINE_DEFAULT, True), ("auto", cudnn.ENGINE_CUDNN, True),
    ("auto", cudnn.ENGINE_CAFFE, False), ("0", cudnn.ENGINE_CUDNN, False),
    ("1", cudnn.ENGINE_CAFFE, True)])
def test_engine_field_and_switch(env, engine, want):
    assert cudnn.wanted(engine, {"CAFFEPY_CUDNN": env}) is want


def test_set_mode_overrides_the_environment():
    try:
        cudnn.set_mode(False)
        assert cudnn.mode({"CAFFEPY_CUDNN": "1"}) == "off"
        cudnn.set_mode("on")
        assert cudnn.wanted(cudnn.ENGINE_CAFFE, {}) is True
        with pytest.raises(ValueError):
            cudnn.set_mode("sometimes")
    finally:
        cudnn.set_mode(None)
    assert cudnn.mode({}) == "auto"


def test_engine_enum_matches_the_schema():
    from caffepy.proto import caffe_pb2
    p = caffe_pb2.ConvolutionParameter
    assert (p.DEFAULT, p.CAFFE, p.CUDNN) == (cudnn.ENGINE_DEFAULT, cudnn.ENGINE_CAFFE,
                                            cudnn.ENGINE_CUDNN)


def test_algo_perf_layout_matches_cudnn_h():
    # cudnnConvolutionFwdAlgoPerf_t: algo, status (int), time (float), memory (size_t),
    # determinism, mathType (int), reserved[3]
    assert ctypes.sizeof(cudnn.AlgoPerf) == 48
    assert cudnn.AlgoPerf.memory.offset == 16 and cudnn.AlgoPerf.reserved.offset == 32


def test_choose_takes_the_first_ranked_algorithm_that_succeeded_and_fits():
    perfs = (cudnn.AlgoPerf * 4)()
    for p, (algo, status, mem) in zip(perfs, [(6, 0, 1 << 30), (1, 3, 0), (2, 0, 4096),
                                              (0, 0, 0)]):
        p.algo, p.status, p.memory = algo, status, mem
    assert cudnn.choose(perfs, 4, 1 << 20) == (2, 4096)
    assert cudnn.choose(perfs, 4, 1 << 31) == (6, 1 << 30)
    assert cudnn.choose(perfs, 2, 1 << 20) is None


def test_workspace_limit_in_mib():
    assert cudnn.workspace_limit({}) == 1024 << 20
    assert cudnn.workspace_limit({"CAFFEPY_CUDNN_WORKSPACE_MB": "8"}) == 8 << 20
    with pytest.raises(CaffeError, match="whole number"):
        cudnn.workspace_limit({"CAFFEPY_CUDNN_WORKSPACE_MB": "lots"})


def test_missing_library_is_one_line_with_the_fix():
    def loader(path):
        raise OSError("%s: cannot open shared object file" % path)
    from caffepy.gpu import cublas
    with pytest.raises(cudnn.CudnnNotFound) as e:
        cublas.load_library(["libcudnn.so.9"], loader=loader, what="cuDNN",
                            error=cudnn.CudnnNotFound, fix="set CAFFEPY_CUDNN_LIBRARY")
    assert "\n" not in str(e.value) and "cuDNN" in str(e.value)


def test_convolution_without_cudnn_runs_im2col_and_forcing_it_fails(emulated):
    from caffepy import common
    from . import cases
    common.set_mode_gpu()
    try:
        layer, bottom, top, _ = cases.build("conv", np.float32)
        layer.setup(bottom, top)
        layer.forward(bottom, top)          # the emulated device has no cuDNN: im2col
        assert getattr(layer, "_gpu_cudnn", None) is None
        cudnn.set_mode("on")
        with pytest.raises(cudnn.CudnnNotFound, match="CAFFEPY_CUDNN=1"):
            layer.forward(bottom, top)
    finally:
        cudnn.set_mode(None)
        common.set_mode_cpu()


def test_convolution_past_the_input_keeps_im2col_under_cudnn(emulated, monkeypatch):
    """cuDNN's symmetric padding and floor division cannot give Caffe's one output of a kernel
    that overhangs the padded input (C++ division toward zero): such a layer runs im2col."""
    from caffepy import common, gpu
    from . import cases

    class Planner(object):
        tf32 = False
        calls = []

        def conv_plan(self, *args):
            self.calls.append(args)
            return "plan"

    monkeypatch.setattr(gpu.current(), "cudnn", Planner(), raising=False)
    common.set_mode_gpu()
    try:
        for case, want in (("conv_overhang", None), ("conv", "plan")):
            layer, bottom, top, _ = cases.build(case, np.float32)
            layer.setup(bottom, top)
            assert layer._gpu_cudnn_plan() == want, case
        assert len(Planner.calls) == 1
    finally:
        common.set_mode_cpu()
