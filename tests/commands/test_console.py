"""The console of ``caffepy train``: a tqdm progress bar on a TTY (a pseudo-terminal here), the
glog lines unchanged when piped or written with --log, solver field overrides, --version and the
--resume errors."""
import os
import re
import subprocess
import sys

import pytest

from caffepy import cli
from caffepy.log import parse_training_log

from . import nets

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(REPO, "tests", "fixtures", "train_log_golden.txt")
ENV = dict(os.environ, PYTHONPATH=REPO)
TRAIN = [sys.executable, "-m", "caffepy", "train", "--solver", "solver.prototxt"]


def mask(text):
    """Blank what changes from run to run: the glog time and thread id, the measured speeds."""
    text = re.sub(r"(?m)^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ ", r"\1MMDD hh:mm:ss.uuuuuu TID ",
                  text)
    return re.sub(r"\((\S+) iter/s, (\S+)s/(\d+) iters\)", r"(R iter/s, Ts/\3 iters)", text)


def run_in_pty(argv, cwd, columns=120):
    """Run ``argv`` with stdin/stdout/stderr on a pseudo-terminal; everything it drew, as text."""
    pty = pytest.importorskip("pty")
    import fcntl
    import select
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=ENV,
                            close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:            # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        proc.wait(timeout=60)
        os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_tty_shows_progress_bars(tmp_path):
    nets.write(tmp_path, max_iter=10)
    rc, out = run_in_pty(TRAIN, str(tmp_path))
    assert rc == 0, out
    bars = [seg for seg in re.split(r"[\r\n]", out) if seg.startswith("train ")]
    assert bars, out
    assert re.search(r"^train \d+/10 .*\[\d\d:\d\d<\d\d:\d\d, +[\d.]+iter/s\], loss [\d.]+, lr ",
                     bars[-1]), bars[-1]
    assert any(seg.startswith("test #0 ") and "/2 " in seg for seg in re.split(r"[\r\n]", out))
    # the glog lines are all there, each on a line of its own
    lines = [ln for ln in out.replace("\r\n", "\n").split("\n") if "solver.cpp:239]" in ln]
    assert len(lines) == 5
    # a bar is lifted off (carriage return, blanks, carriage return) before each line is written
    assert all(re.match(r"^I\d{4} \d\d:", ln.split("\r")[-1]) for ln in lines), lines


def test_piped_and_log_file_keep_todays_glog_lines(tmp_path):
    nets.write(tmp_path, max_iter=10)
    out = subprocess.run(TRAIN + ["--log", "train.log"], cwd=str(tmp_path), env=ENV,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    with open(GOLDEN) as f:
        golden = f.read()
    assert mask(out.stderr) == golden
    with open(str(tmp_path / "train.log")) as f:
        assert mask(f.read()) == golden
    assert "\r" not in out.stderr and "\x1b" not in out.stderr
    rows = parse_training_log(str(tmp_path / "train.log"))
    train_rows, test_rows = rows[0], rows[1]
    assert [r["NumIters"] for r in train_rows] == [0, 2, 4, 6, 8]
    assert [r["NumIters"] for r in test_rows] == [0, 5, 10]


def test_solver_field_overrides(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path, max_iter=10))
    assert cli.main(["train", "-solver", "solver.prototxt", "-max_iter=3", "--test_interval", "2",
                     "--snapshot_prefix", "snap/quick", "--base_lr=0.01", "--lr_policy", "fixed",
                     "--test_initialization", "false"]) == 0
    err = capsys.readouterr().err
    assert sorted(os.listdir("snap")) == ["quick_iter_3.caffemodel", "quick_iter_3.solverstate"]
    for line in ("Override: max_iter = 3 (solver file: 10)",
                 'Override: snapshot_prefix = "snap/quick" (solver file: "snap/tiny")',
                 "Override: test_initialization = false (solver file: unset)",
                 'Override: lr_policy = "fixed" (solver file: "step")'):
        assert line in err
    assert "Iteration 0, Testing net" not in err and "Iteration 2, Testing net (#0)" in err
    assert "Iteration 0, lr = 0.01" in err


@pytest.mark.parametrize("flags, msg", [
    (["-max_iter=-3"], "max_iter should be >= 0 (got -3) (after the overrides --max_iter)"),
    (["--lr_policy", "sometimes"], "lr_policy"),
    (["--resume"], "--resume continues a distributed run: solver.prototxt has no `cluster` section"),
])
def test_override_and_resume_errors_are_one_line(flags, msg, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path))
    assert cli.main(["train", "-solver", "solver.prototxt"] + flags) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("caffepy train: error: ") and msg in err[-1]


def test_resume_names_the_missing_checkpoint_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path))
    with open("solver.prototxt", "a") as f:
        f.write('cluster { workspace: "ws" }\n')
    assert cli.main(["train", "-solver", "solver.prototxt", "--resume"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--resume: no checkpoint folder ws/checkpoint" in err


def test_bad_enum_override_and_version(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--solver_mode", "TPU"])
    assert "expected one of CPU, GPU, got 'TPU'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    import caffepy
    assert capsys.readouterr().out.strip() == "caffepy %s" % caffepy.__version__
