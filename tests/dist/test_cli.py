"""``caffepy train --cluster C`` (in process) runs the distributed solver and writes its files."""
import os

import nets
from caffepy import cli
from caffepy.log import teardown as teardown_log


def test_train_cluster_flag_and_resume(tmp_path):
    (tmp_path / "net.prototxt").write_text(nets.DUMMY)
    ws = tmp_path / "ws"
    (tmp_path / "solver.prototxt").write_text(
        'net: "%s" base_lr: 0.1 lr_policy: "fixed" max_iter: 6 snapshot_after_train: false '
        'checkpoint_after: 2 checkpoint_frequency: 2\n' % (tmp_path / "net.prototxt"))
    (tmp_path / "cluster.prototxt").write_text(
        'nworker_groups: 2 nworkers_per_group: 2 nservers_per_group: 2 workspace: "%s/"\n' % ws)
    args = ["train", "--solver", str(tmp_path / "solver.prototxt"), "--cluster", str(tmp_path / "cluster.prototxt")]
    assert cli.main(args) == 0
    names = set(os.listdir(ws / "checkpoint"))
    assert {"step2.manifest", "step4.manifest", "step6.manifest"} <= names
    assert (ws / "visualization" / "net.json").exists()
    assert cli.main(args + ["--resume"]) == 0      # nothing left to do: resumes at step 6 and stops


def test_train_refuses_to_overwrite_checkpoints(tmp_path, capsys):
    """A second run in a workspace with checkpoints stops with one line naming --resume and
    --overwrite; --overwrite starts again from step 0."""
    (tmp_path / "net.prototxt").write_text(nets.DUMMY)
    ws = tmp_path / "ws"
    (tmp_path / "solver.prototxt").write_text(
        'net: "%s" base_lr: 0.1 lr_policy: "fixed" max_iter: 2 snapshot_after_train: false\n'
        % (tmp_path / "net.prototxt"))
    (tmp_path / "cluster.prototxt").write_text('nworkers_per_group: 2 workspace: "%s/"\n' % ws)
    args = ["train", "--solver", str(tmp_path / "solver.prototxt"), "--cluster", str(tmp_path / "cluster.prototxt")]
    try:
        assert cli.main(args) == 0
        capsys.readouterr()
        assert cli.main(args) != 0
        err = [line for line in capsys.readouterr().err.splitlines() if "--overwrite" in line]
        assert len(err) == 1 and "--resume" in err[0] and "holds checkpoints" in err[0]
        assert cli.main(args + ["--overwrite"]) == 0
    finally:
        teardown_log()       # the handler writes to capsys's stream, closed after this test
