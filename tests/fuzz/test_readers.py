"""Fuzz every reader of untrusted input (tests/fuzz/readers.py, TARGETS): prototxt nets and
solvers; .caffemodel (Net.copy_from and read_net), binary nets, .solverstate, .binaryproto means;
HDF5 weights, HDF5Data files, .solverstate.h5; distributed checkpoints and manifests; the net JSON
of `caffepy draw`; the MPI engine's frames; the ONNX exporter's inputs; Datum records, read
directly and through an LMDB Data layer.

Each example builds one mutated input and runs its reader in a forked child (harness.run_case);
the outcome must be success or a one-line CaffeError naming the file. Examples per reader:
CAFFEPY_FUZZ_EXAMPLES (default small, for CI; `tools/fuzz.py` runs longer)."""
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import harness
import readers


@pytest.mark.parametrize("name,make", [(t[0], t[2]) for t in readers.targets()],
                         ids=["%s-%s" % (t[1], t[0]) for t in readers.targets()])
@settings(max_examples=harness.examples(), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@pytest.mark.slow
@given(data=st.data())
def test_fuzz(name, make, data):
    readers.warm()
    with tempfile.TemporaryDirectory() as workdir:
        why, _ = readers.run_one(make, harness.HypothesisSource(data), workdir)
    assert why is None, "%s: %s" % (name, why)
