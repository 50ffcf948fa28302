"""numba's kernel cache on a read-only install: numba refuses to compile a ``cache=True`` kernel
when neither the folder next to it nor its user-wide cache is writable; caffepy then points it at
a writable folder (caffepy.math.kernels.cache_dir_fallback)."""
import os
import shutil
import subprocess
import sys

import pytest

from caffepy.math import kernels
from tests.conftest import ROOT


def test_a_writable_install_keeps_numba_s_own_cache(tmp_path):
    assert kernels.cache_dir_fallback(str(tmp_path), environ={}) is None


def test_the_user_s_numba_cache_dir_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert kernels.cache_dir_fallback(str(tmp_path), environ={"NUMBA_CACHE_DIR": "/x"}) is None


def test_a_read_only_install_caches_under_xdg_then_tmp(tmp_path, monkeypatch):
    module_dir = str(tmp_path / "site-packages" / "caffepy" / "math")
    os.makedirs(module_dir)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).startswith(
        str(tmp_path / "site-packages")) else real_access(path, mode))
    xdg = tmp_path / "xdg"
    got = kernels.cache_dir_fallback(module_dir, environ={"XDG_CACHE_HOME": str(xdg)})
    assert got == str(xdg / "caffepy" / "numba") and os.path.isdir(got)
    (tmp_path / "ro").write_text("a file: no folder can be made under it")
    got = kernels.cache_dir_fallback(module_dir, environ={"XDG_CACHE_HOME": str(tmp_path / "ro")})
    assert got is not None and got.endswith("caffepy-numba-%d" % os.getuid())


RUN_BN = """
import numpy as np
from caffepy.math import kernels
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io
assert kernels.get() is not None, "numba kernels not loaded"
param = caffe_pb2.NetParameter()
io.parse_text('layer { name: "d" type: "Input" top: "x" '
    'input_param { shape { dim: 4 dim: 3 dim: 5 dim: 5 } } } '
    'layer { name: "bn" type: "BatchNorm" bottom: "x" top: "y" }', param)
net = Net(param, caffe_pb2.TRAIN)
net.blobs["x"].data[...] = np.random.RandomState(0).rand(4, 3, 5, 5)
y = net.forward()["y"]
assert abs(float(y.mean())) < 1e-5, y.mean()
print("ok", kernels.cache_dir_fallback())
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")
def test_kernels_run_on_a_read_only_file_system(tmp_path):
    """The whole file system read-only (bubblewrap), HOME and the package included: a BatchNorm
    forward in TRAIN runs numba's cached kernels, which compile into $TMPDIR (the one writable
    folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CACHE", "XDG_CACHE"))}
    env["PYTHONPATH"], env["TMPDIR"] = ROOT, str(tmp_path)
    # every path read-only but this test's own folder (the interpreter, a venv and the checkout
    # may themselves live under /tmp, so /tmp is not replaced)
    cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--bind", str(tmp_path), str(tmp_path), "--unshare-net", "--die-with-parent",
           sys.executable, "-c", RUN_BN]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0 and "No permissions" in p.stderr + p.stdout:
        pytest.skip("bubblewrap cannot make namespaces here")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split()[0] == "ok" and "caffepy-numba-" in p.stdout, p.stdout
