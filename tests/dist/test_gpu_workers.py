"""Worker groups computing on the GPU (the caller's mode: worker threads inherit it) with their
servers on the CPU give the single GPU process's weights (BSP, float64): on a real device
(marked ``gpu``) and on the emulated one (the kernels compiled for the CPU; runs everywhere)."""
import numpy as np
import pytest

import nets
from conftest import reference
from caffepy import common, dist, gpu
from caffepy.solvers import get_solver

G, K, B = 2, 2, 4


@pytest.fixture(params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def gpu_mode(request):
    if request.param == "cuda":
        pytest.importorskip("pycuda.driver", reason="needs pycuda and an NVIDIA GPU")
        if not gpu.available():
            pytest.skip("pycuda is installed but no CUDA device / driver is usable")
    else:
        from tests.gpu.emulator import EmulatedDevice, compiler
        if not compiler():
            pytest.skip("no C++ compiler to build the kernels for the emulated device")
        if gpu.is_active():
            pytest.skip("a device is active in this process already")
        gpu.install(EmulatedDevice())
    common.set_mode_gpu()
    yield
    common.set_mode_cpu()
    if request.param == "emulated":
        gpu.uninstall()


def test_bsp_gpu_workers_match_the_single_gpu_process(tmp_path, gpu_mode):
    seen = []
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, 20), dtype=np.float64)

    def feed(w, nworkers, net):
        seen.append(common.mode())
        nets.feeder(x, y)(w, nworkers, net)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(tmp_path))
    result = dist.train(solver, cluster=c, feeder=feed)
    assert result.step == 20 and seen == [common.GPU] * (G * K)
    want = reference(G, K, B)                 # the single process, on the GPU (this thread's mode)
    for w, p in zip(want, solver.net.learnable_params):
        np.testing.assert_allclose(p.data, w, rtol=0, atol=1e-6)
