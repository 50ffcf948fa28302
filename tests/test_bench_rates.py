"""benchmarks/rates.py: the GFLOP/s and share-of-peak cells of the benchmark tables."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import rates  # noqa: E402

NET = """name: "tiny"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }
layer { name: "c" type: "Convolution" bottom: "x" top: "y"
        convolution_param { num_output: 2 kernel_size: 3 } }
"""


def test_forward_and_training_gflop(tmp_path):
    path = tmp_path / "tiny.prototxt"
    path.write_text(NET)
    # 2 x 3 x 3 weights at 2 x 2 output positions, 2 FLOPs a multiply-add, plus 8 bias adds
    assert abs(rates.forward_gflop(str(path)) - (2 * 18 * 4 + 8) / 1e9) < 1e-15
    assert abs(rates.train_gflop(str(path)) - 3 * (2 * 18 * 4 + 8) / 1e9) < 1e-15


def test_cells_and_peak_per_thread_count(tmp_path):
    peak = {"single": 90.0, "all": 180.0, "threads": 2}
    assert rates.peak_for(peak, 1) == 90.0 and rates.peak_for(peak, 2) == 180.0
    assert rates.peak_for(dict(peak, threads=4), 2) == 180.0   # 2 of 4 threads: 2 x single
    assert rates.cell(9.0, 100.0, 180.0) == "90.0 (50%)"       # 9 GFLOP in 0.1 s
    assert rates.cell(9.0, None, 180.0) == "-" and rates.cell(9.0, float("nan"), 180.0) == "-"
    saved = tmp_path / "peak.json"
    saved.write_text(json.dumps(peak))
    assert rates.load_peak(str(saved)) == peak
    assert "90.0 GFLOP/s on 1 thread, 180.0 on 2" in rates.describe(peak)


def test_median_row():
    peak = {"single": 90.0, "all": 180.0, "threads": 2}
    # median of the rounds 100, 120, 110 ms: 110 ms for 9.9 GFLOP on 2 threads = 90 GFLOP/s
    assert (rates.median_row("net", 8, 2, [100.0, 120.0, 110.0], 9.9, peak)
            == "| net | 8 | 2 | 110.0 | 100.0, 120.0, 110.0 | 9.90 | 90.0 (50%) |")
