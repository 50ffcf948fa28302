"""A disk that fills while snapshots / checkpoints are written (a 512 KiB tmpfs): one line naming
the file and "no space left on device", the previous snapshot or checkpoint complete and usable,
no half-written file left behind."""
import os
import subprocess
import sys

import pytest

from caffepy import cli
from caffepy.log import teardown as teardown_log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# DummyData 6 x 200 -> InnerProduct 100: 80 KB of weights, 80 KB of momentum per snapshot
NET = """name: "wide"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 6 dim: 200 } shape { dim: 6 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 100 weight_filler { type: "gaussian" std: 0.05 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs (skipped where mounting is refused), unmounted afterwards."""
    d = tmp_path / "disk"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(d)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % p.stdout.decode(errors="replace").strip())
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)])


def _leftovers(d):
    return [n for n in os.listdir(d) if n.endswith(".tmp") or n.startswith(".")]


def test_snapshot_on_a_full_disk_stops_with_one_line(small_disk, tmp_path, monkeypatch):
    (tmp_path / "net.prototxt").write_text(NET)
    (tmp_path / "solver.prototxt").write_text(
        'net: "net.prototxt" base_lr: 0.01 momentum: 0.9 lr_policy: "fixed" max_iter: 40 '
        'snapshot: 2 snapshot_prefix: "%s/wide" random_seed: 3 solver_mode: CPU\n' % small_disk)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("CAFFEPY_DEBUG", None)
    p = subprocess.run([sys.executable, "-m", "caffepy", "train", "--solver", "solver.prototxt"],
                       cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120)
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "no space left on device" in errors[0], p.stderr[-1500:]
    assert "Traceback" not in p.stderr
    states = sorted(n for n in os.listdir(small_disk) if n.endswith(".solverstate"))
    models = sorted(n for n in os.listdir(small_disk) if n.endswith(".caffemodel"))
    assert states and [s.replace(".solverstate", ".caffemodel") for s in states] == models
    assert _leftovers(small_disk) == []                      # no temp file, no lone .caffemodel
    last = max(states, key=lambda n: int(n.split("_iter_")[1].split(".")[0]))
    assert ("the last complete one is %s" % (small_disk / last)) in errors[0]
    failed = int(last.split("_iter_")[1].split(".")[0]) + 2
    assert ("wide_iter_%d." % failed) in errors[0]
    # the previous snapshot loads and training continues from it (on a disk with room)
    from caffepy.solvers import get_solver
    monkeypatch.chdir(tmp_path)
    solver = get_solver("solver.prototxt")
    solver.param.snapshot = 0
    solver.param.snapshot_after_train = False
    solver.restore(str(small_disk / last))
    assert solver.iter == failed - 2
    solver.step(1)
    assert solver.iter == failed - 1


def test_checkpoint_on_a_full_disk_keeps_the_previous_one(small_disk, tmp_path, capsys):
    """Threads engine: the step whose files do not fit is never complete; the job stops with one
    line naming the file and the last complete checkpoint, which verifies and --resume uses."""
    from caffepy.dist import checkpoint
    (tmp_path / "net.prototxt").write_text(NET)
    solver_file = tmp_path / "solver.prototxt"
    solver_file.write_text(
        'net: "%s" base_lr: 0.01 momentum: 0.9 lr_policy: "fixed" max_iter: 40 random_seed: 3 '
        'snapshot_after_train: false checkpoint_after: 2 checkpoint_frequency: 2\n'
        % (tmp_path / "net.prototxt"))
    (tmp_path / "cluster.prototxt").write_text(
        'nworkers_per_group: 2 nservers_per_group: 1 workspace: "%s/"\n' % small_disk)
    args = ["train", "--solver", str(solver_file), "--cluster", str(tmp_path / "cluster.prototxt")]
    try:
        assert cli.main(args) == 1
        err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    finally:
        teardown_log()
    assert len(err) == 1 and "no space left on device" in err[0], err
    step, manifest = checkpoint.latest_complete(str(small_disk), verify=True)
    assert step is not None and step >= 2
    assert "last complete checkpoint: step %d" % step in err[0]
    assert checkpoint.problem(str(small_disk), manifest, verify=True) is None
    d = checkpoint.checkpoint_dir(str(small_disk))
    assert [n for n in os.listdir(d) if n.endswith(".tmp")] == []
    for f in manifest.file:                           # every file of it reads back
        checkpoint.read_slices(os.path.join(d, f))
    # --resume takes that step (on a disk with room: the checkpoints copied over)
    import shutil
    roomy = tmp_path / "roomy"
    shutil.copytree(str(small_disk), str(roomy))
    for n in os.listdir(roomy / "checkpoint"):
        if n.startswith("step%d" % (step + 2)):
            os.remove(str(roomy / "checkpoint" / n))      # the failed step's files, if any
    solver_file.write_text(solver_file.read_text().replace("max_iter: 40", "max_iter: %d" % (step + 2)))
    (tmp_path / "cluster.prototxt").write_text(
        'nworkers_per_group: 2 nservers_per_group: 1 workspace: "%s/"\n' % roomy)
    try:
        assert cli.main(args + ["--resume"]) == 0
        assert "Resuming from checkpoint step %d" % step in capsys.readouterr().err
    finally:
        teardown_log()
