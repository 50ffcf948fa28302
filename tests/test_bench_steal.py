"""benchmarks/steal.py: the hypervisor's steal share beside a benchmark's child process."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import steal  # noqa: E402


def test_run_measured_returns_the_output_and_a_share():
    out, share = steal.run_measured([sys.executable, "-c", "print('done')"])
    assert out.strip() == "done"
    if steal.steal_jiffies() is None:
        assert share is None
    else:
        assert 0.0 <= share <= 1.0


def test_steal_column_read_from_proc_stat(tmp_path, monkeypatch):
    fake = tmp_path / "stat"
    fake.write_text("cpu  10 0 20 300 4 0 1 77 0 0\ncpu0 5 0 10 150 2 0 0 40 0 0\n")
    real_open = open

    def fake_open(path, *a, **k):
        return real_open(fake if path == "/proc/stat" else path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    assert steal.steal_jiffies() == 77
    fake.write_text("intr 1 2 3\n")
    assert steal.steal_jiffies() is None
