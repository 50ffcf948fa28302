"""Slurm in the cluster in a box (tools/slurm_box.py: slurmctld on h1, slurmd on h1 and h2, munge):
``srun --mpi=pmix`` (Open MPI) trains BSP equal to the single process; a rank killed, or a whole
node lost, is named in one line on srun's terminal (and in failure.txt) and ``--resume`` ends
bit-identical; ``scancel --signal=TERM`` (a scheduler's notice before preemption) makes the job
checkpoint at the next step and exit 0; the README's sbatch script runs as written."""
import os
import re
import signal
import sys
import time

import pytest

import launchers as L
import nets
from conftest import ROOT, needs_mpi
from caffepy.dist import checkpoint

pytestmark = [pytest.mark.slow, needs_mpi]


def _whole(slurm, tmp_path_factory):
    return L.uninterrupted("srun", lambda ws, out: L.srun(
        slurm, ["--workspace", ws, "--max_iter", str(L.MAX_ITER), "--out", out]), tmp_path_factory)


def _resume_equals_whole(slurm, ws, tmp_path, tmp_path_factory):
    final = tmp_path / "final.npz"
    done = L.srun(slurm, L.long_args(ws, "--resume", "--out", str(final)))
    assert done.returncode == 0, done.err[-3000:]
    assert "RESULT step=%d" % L.MAX_ITER in done.out
    L.same_bits(final, _whole(slurm, tmp_path_factory))


def test_srun_pmix_bsp_matches_single_process(slurm_box, tmp_path_factory):
    _whole(slurm_box(2), tmp_path_factory)    # checks the final params against the single process


# what is lost on h2 -> what the line names
LOST = {
    "rank": r"^caffepy dist: rank 3 \(worker 3 \(group 1\)\) on host h2 died",
    "node": r"^caffepy dist: rank 2 \(.*\) on host h2 died and rank 3 \(.*\) on host h2 died",
}


@pytest.mark.parametrize("what", sorted(LOST))
def test_srun_lost_then_resume(slurm_box, tmp_path, tmp_path_factory, what):
    """kill -9 of rank 3, or of the whole node h2 (its slurmd, step daemon and ranks): srun's
    terminal shows caffepy's line once, as failure.txt has it; the resumed run (on the same
    nodes, or a fresh pair after the node loss) equals the uninterrupted one bit for bit."""
    slurm = slurm_box(2)
    ws = str(tmp_path / "ws")
    proc = L.srun(slurm, L.long_args(ws), wait=False)
    victim = L.rank_pid(slurm.c, "h2", 3, time.time() + 60)
    if what == "rank":
        line, shown = L.lost_rank(proc, ws, lambda: os.kill(victim, signal.SIGKILL), LOST[what])
    else:
        line, shown = L.lost_rank(proc, ws, lambda: slurm.c.kill_host("h2"), LOST[what])
    assert shown == [line], proc.err[-3000:]
    if what == "rank":
        slurm.wait_idle(timeout=60)
    else:
        slurm.c.close()
        slurm = slurm_box(2)
    _resume_equals_whole(slurm, ws, tmp_path, tmp_path_factory)


def test_scancel_signal_term_checkpoints_then_resume(slurm_box, tmp_path, tmp_path_factory):
    """``scancel --signal=TERM``: every task gets SIGTERM; the job checkpoints at one step every
    worker agrees on, says how to continue and srun exits 0; --resume equals the whole run."""
    slurm = slurm_box(2)
    ws = str(tmp_path / "ws")
    proc = L.srun(slurm, L.long_args(ws, "--signals"), wait=False)
    L.wait_checkpoint(proc, ws)
    jobs = slurm.run(["squeue", "-h", "-o", "%i"]).out.split()
    assert len(jobs) == 1, jobs
    assert slurm.run(["scancel", "--signal=TERM", jobs[0]]).returncode == 0
    L.finish(proc, 60)
    assert proc.returncode == 0, proc.err[-3000:]
    m = re.search(r"Stopped by SIGTERM at step (\d+): checkpoint (\S+); continue with --resume",
                  proc.err)
    assert m and 20 <= int(m.group(1)) < L.MAX_ITER, proc.err[-3000:]
    assert "Traceback" not in proc.err
    _resume_equals_whole(slurm, ws, tmp_path, tmp_path_factory)


def _readme_script():
    """The sbatch script of README.md's Slurm section, as written."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    blocks = re.findall(r"```bash\n(#!/bin/bash\n#SBATCH.*?)```", text, re.S)
    assert len(blocks) == 1, "README.md: one sbatch script expected"
    return blocks[0]


def _job_output(d, job):
    try:
        with open(d / ("slurm-%s.out" % job)) as f:
            return f.read()
    except OSError:
        return ""


@pytest.mark.parametrize("launch", ["srun", "mpiexec"])
def test_readme_sbatch_script(slurm_box, tmp_path, launch):
    """The README's script, submitted with sbatch from a directory holding its solver.prototxt and
    cluster.prototxt. "srun": ``scancel --signal=TERM`` once it trains: the job checkpoints and
    completes (exit 0); ``sbatch job.sbatch --resume`` finishes it. "mpiexec": the script's line
    for the mpich wheel (Hydra starts its proxies with srun inside the allocation) in place of the
    srun line, run to the end."""
    slurm = slurm_box(2)
    script = _readme_script()
    if launch == "mpiexec":
        alt = re.search(r"^# the mpich wheel instead: (mpiexec .*)$", script, re.M).group(1)
        script = re.sub(r"^.*srun .*$", lambda m: alt, script, flags=re.M)
    d = tmp_path / "job"
    (d / "bin").mkdir(parents=True)
    (d / "job.sbatch").write_text(script)
    (d / "net.prototxt").write_text(nets.DUMMY)
    (d / "solver.prototxt").write_text(
        'net: "net.prototxt" base_lr: 0.05 momentum: 0.9 lr_policy: "fixed" max_iter: 300 '
        'random_seed: 5 display: 10 snapshot_after_train: false checkpoint_frequency: 100\n')
    (d / "cluster.prototxt").write_text('nworker_groups: 2 nworkers_per_group: 2 '
                                        'nservers_per_group: 2 workspace: "ws/"\n')
    shim = d / "bin" / "caffepy"                  # this checkout's caffepy, as `pip install` would
    shim.write_text('#!/bin/sh\nexec "%s" -m caffepy "$@"\n' % sys.executable)
    shim.chmod(0o755)
    env = slurm.env(PYTHONPATH=ROOT, PATH="%s:%s" % (d / "bin", os.environ["PATH"]))
    job = slurm.sbatch("job.sbatch", cwd=str(d), env=env)
    if launch == "srun":
        deadline = time.time() + 120
        while not re.search(r"Iteration [1-9]\d* \(group", _job_output(d, job)):
            assert time.time() < deadline and slurm.job(job).get("JobState") in (
                "PENDING", "RUNNING", "CONFIGURING"), _job_output(d, job)[-3000:]
            time.sleep(0.1)
        assert slurm.run(["scancel", "--signal=TERM", job]).returncode == 0
    state = slurm.wait_job(job, timeout=180)
    out = _job_output(d, job)
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", out[-3000:]
    assert "Hosts from MPI's shared-memory split: h1 (ranks 0,1), h2 (ranks 2,3)" in out
    if launch == "srun":
        m = re.search(r"Stopped by SIGTERM at step (\d+): checkpoint \S+; continue with --resume", out)
        assert m and int(m.group(1)) < 300, out[-3000:]
        job = slurm.sbatch("job.sbatch", cwd=str(d), env=env, args=["--resume"])
        state = slurm.wait_job(job, timeout=180)
        out = _job_output(d, job)
        assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", out[-3000:]
        assert "Resuming from checkpoint step %s" % m.group(1) in out, out[-3000:]
    assert "Optimization Done." in out, out[-3000:]
    assert os.path.exists(d / "ws" / "checkpoint" / "step300.manifest")


# (node taken away or given back before the requeue, nodes before, after, groups before, after)
REQUEUES = {"2to1": ("state=drain reason=test", "h[1-2]", "h1", 2, 1),
            "1to2": ("state=resume", "h1", "h[1-2]", 1, 2)}


@pytest.mark.parametrize("direction", sorted(REQUEUES))
def test_requeue_onto_another_node_count_resumes_on_the_new_shape(slurm_box, tmp_path,
                                                                  direction):
    """The README's script as its requeue note says (``--nodes=1-2``, ``--resume`` once
    restarted) with ``nworker_groups: 0`` (one worker group per node's two ranks). 2to1: it
    trains 2 groups x 2 workers on h1 and h2; h2 is drained and the job requeued (``scontrol
    requeue``: SIGTERM, so a checkpoint at the next step); it comes back on h1 alone and resumes
    on 1 group x 2 workers. 1to2: h2 is drained before the job starts, so it trains on h1 alone;
    h2 comes back, the job is requeued and resumes on both. The total batch is kept and the job
    ends; its last checkpoint records the new shape."""
    change, before, after, groups, groups_after = REQUEUES[direction]
    slurm = slurm_box(2)
    d = tmp_path / "job"
    (d / "bin").mkdir(parents=True)
    script = _readme_script().replace("#SBATCH --nodes=2", "#SBATCH --nodes=1-2")
    script = script.replace(' "$@"\n', ' ${SLURM_RESTART_COUNT:+--resume} "$@"\n', 1)
    (d / "job.sbatch").write_text(script)
    (d / "net.prototxt").write_text(nets.DUMMY)
    (d / "solver.prototxt").write_text(
        'net: "net.prototxt" base_lr: 0.05 momentum: 0.9 lr_policy: "fixed" max_iter: 300 '
        'random_seed: 5 display: 10 snapshot_after_train: false checkpoint_frequency: 100\n')
    (d / "cluster.prototxt").write_text('nworker_groups: 0 nworkers_per_group: 2 '
                                        'nservers_per_group: 2 workspace: "ws/"\n')
    shim = d / "bin" / "caffepy"
    shim.write_text('#!/bin/sh\nexec "%s" -m caffepy "$@"\n' % sys.executable)
    shim.chmod(0o755)
    env = slurm.env(PYTHONPATH=ROOT, PATH="%s:%s" % (d / "bin", os.environ["PATH"]))
    if direction == "1to2":
        assert slurm.run(["scontrol", "update", "nodename=h2", "state=drain",
                          "reason=test"]).returncode == 0
    job = slurm.sbatch("job.sbatch", cwd=str(d), env=env)
    try:
        deadline = time.time() + 120
        while not re.search(r"Iteration [1-9]\d* \(group", _job_output(d, job)):
            assert time.time() < deadline and slurm.job(job).get("JobState") in (
                "PENDING", "RUNNING", "CONFIGURING"), _job_output(d, job)[-3000:]
            time.sleep(0.1)
        first = _job_output(d, job)
        assert slurm.job(job)["NodeList"] == before
        assert "nworker_groups 0: %d worker group%s of 2 from %d ranks" % (
            groups, "s" if groups > 1 else "", 2 * groups) in first, first[-3000:]
        assert slurm.run(["scontrol", "update", "nodename=h2"] + change.split()).returncode == 0
        assert slurm.run(["scontrol", "requeue", job]).returncode == 0
        deadline = time.time() + 60
        while slurm.job(job).get("JobState") != "PENDING":  # then start it now, not in 2 minutes
            assert time.time() < deadline, slurm.job(job)
            time.sleep(0.25)
        slurm.run(["scontrol", "update", "jobid=%s" % job, "StartTime=now"])
        state = slurm.wait_job(job, timeout=180)
    finally:
        slurm.run(["scontrol", "update", "nodename=h2", "state=resume"])
    out = _job_output(d, job)
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", out[-3000:]
    assert state["Restarts"] == "1" and state["NodeList"] == after, state
    shape = {1: "1 group x 2 workers", 2: "2 groups x 2 workers"}
    total = 8 * groups                   # the net's batch of 8 per worker group, first shape
    assert "Resume: shape changed: %s, 2 server shards -> %s, 2 server shards (per-worker batch " \
           "%d -> %d, total %d kept); data positions re-mapped" % (
               shape[groups], shape[groups_after], total // (2 * groups),
               total // (2 * groups_after), total) in out, out[-3000:]
    assert "Optimization Done." in out, out[-3000:]
    manifest = checkpoint.read_manifest(str(d / "ws" / "checkpoint" / "step300.manifest"))
    assert (manifest.nworker_groups, manifest.nworkers_per_group) == (groups_after, 2)
    assert list(manifest.total_batch) == [total]
