"""Fuzz: LMDB / LevelDB Datum records, read directly and through a Data layer.

Each example builds one mutated input and runs its reader in a forked child (harness.run_case);
the outcome must be success or a one-line CaffeError naming the file. Examples per reader:
CAFFEPY_FUZZ_EXAMPLES (default small, for CI)."""
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import harness
import readers


@pytest.mark.parametrize("name,make", [(t[0], t[2]) for t in readers.targets('db')])
@settings(max_examples=harness.examples(), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz(name, make, data):
    readers.warm()
    with tempfile.TemporaryDirectory() as workdir:
        why, _ = readers.run_one(make, harness.HypothesisSource(data), workdir)
    assert why is None, "%s: %s" % (name, why)
