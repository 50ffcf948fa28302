"""The MPI engine's framing: empty, small (one bucket), big (alone) and mixed buffers of several
dtypes arrive intact and in order, one rank to another and back."""
import os
import subprocess
import sys

import pytest

from conftest import HERE, ROOT, needs_mpi
from caffepy.dist import transport as T
from caffepy.errors import CaffeError


def test_kind_registry_refuses_a_second_meaning():
    assert T.register_kind("GRAD", T.GRAD) == T.GRAD          # the same entry again is fine
    with pytest.raises(CaffeError, match="clashes"):
        T.register_kind("OTHER", T.GRAD)
    with pytest.raises(CaffeError, match="clashes"):
        T.register_kind("GRAD", 999)
    assert T.KIND_NAMES[T.GRAD] == "GRAD" and 999 not in T.KIND_NAMES


@pytest.mark.slow
@needs_mpi
def test_engine_round_trips_every_framing():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(["mpiexec", "-n", "2", sys.executable, os.path.join(HERE, "engine_run.py")],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ENGINE OK" in p.stdout
