"""Every CUDA kernel source compiles with nvcc, in float and in double (no GPU needed).

Each family is one translation unit per dtype, exactly the text pycuda compiles at run time
(``caffepy.gpu.kernels.translation_unit``), built with ``nvcc -arch=sm_80 --ptx``. The units are
compiled in parallel; the test skips only when nvcc is absent. ``CAFFEPY_NVCC_ARCH`` overrides
the architecture.
"""
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from caffepy.gpu import kernels

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
ARCH = os.environ.get("CAFFEPY_NVCC_ARCH", "sm_80")
UNITS = [(name, dt) for name in sorted(kernels.load_all_sources()) for dt in kernels.DTYPES]


def _compile(tmp_path, name, dtype):
    src = tmp_path / ("%s_%s.cu" % (name, dtype.name))
    src.write_text(kernels.translation_unit(name, dtype))
    out = src.with_suffix(".ptx")
    r = subprocess.run([NVCC, "-arch=%s" % ARCH, "--ptx", "-std=c++14", "-o", str(out), str(src)],
                       capture_output=True, text=True)
    return name, dtype, r.returncode, r.stderr, out


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_every_kernel_source_compiles_with_nvcc(tmp_path):
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda u: _compile(tmp_path, *u), UNITS))
    failures = ["%s (%s):\n%s" % (n, dt.name, err[-3000:]) for n, dt, rc, err, _ in results if rc]
    assert not failures, "nvcc failed:\n" + "\n".join(failures)
    for name, dtype, _, _, out in results:
        ptx = out.read_text()
        for kname in kernels.kernel_signatures(kernels.SOURCES[name], dtype):
            assert ".entry %s(" % kname in ptx, "%s: kernel %s missing from the PTX" % (name, kname)


@pytest.mark.parametrize("name", sorted(kernels.load_all_sources()))
def test_double_units_never_name_float(name):
    text = kernels.translation_unit(name, np.float64)
    assert not re.search(r"\bfloat\b", text), "%s: 'float' in the double translation unit" % name
    assert not re.search(r"\b\d+\.\d*f\b|\b\d+f\b", text), "%s: float literal (1.0f)" % name


@pytest.mark.parametrize("name", sorted(kernels.load_all_sources()))
def test_every_kernel_takes_its_count_first(name):
    for kname, codes in kernels.kernel_signatures(kernels.SOURCES[name], np.float32).items():
        assert codes.startswith("i"), "%s.%s: first argument must be 'const int n'" % (name, kname)
