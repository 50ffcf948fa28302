"""benchmarks/bench_peak.py runs and reports what it measured (no timing is asserted)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
pytest.importorskip("numba")
import bench_peak  # noqa: E402


@pytest.mark.slow          # compiles four numba kernels (~10 s)
def test_peak_loop_reports_rates_and_isa(tmp_path, capsys):
    out = tmp_path / "peak.json"
    assert bench_peak.main(["--steps", "2000", "--repeats", "1", "--threads", "1",
                            "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["single"] > 0 and r["all"] > 0 and r["threads"] == 1
    assert r["register"] in ("xmm", "ymm", "zmm") and r["fma_instructions"] > 0
    assert r["lanes"] == {"xmm": 4, "ymm": 8, "zmm": 16}[r["register"]]
    assert "GFLOP/s" in capsys.readouterr().out
