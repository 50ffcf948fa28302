"""Across emulated hosts (tools/cluster.py): BSP equals the single process, servers spread one per
host, and losing a worker, a server, the coordinator or a whole host stops the job quickly with one
line naming it (mpiexec -disable-auto-cleanup, so Hydra leaves the watchdog's output path up);
``--resume`` then finishes, equals the single process and, bit for bit, the uninterrupted run
(MemoryData feeds). Under Hydra's default clean-up the line is in failure.txt only; a host that
does not see the workspace is refused before training; a workspace one host exports over NFS and
the other mounts trains as the single process (where the kernel has NFS)."""
import os
import re
import signal
import time

import numpy as np
import pytest

from conftest import box_mpiexec, is_rank_process, needs_mpi, reference
from caffepy.dist import checkpoint

pytestmark = [pytest.mark.slow, needs_mpi]
G, K, B = 2, 2, 4
TIMEOUT = 20          # the cluster timeout mpi_run.py sets


def _check_final(path, max_iter):
    got = np.load(str(path), allow_pickle=False)
    for i, want in enumerate(reference(G, K, B, max_iter=max_iter)):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("net", ["mlp", "embed"])
def test_bsp_two_hosts_matches_single_process(cluster_box, tmp_path, net):
    """Wait-free backprop (the default) on both; the Embed net also has its table sharded over the
    servers and SFB on its InnerProduct (AUTO: batch 2 x (12 + 3) < 12 x 3)."""
    box = cluster_box(2, rate="1gbit")
    out = tmp_path / "final.npz"
    p = box_mpiexec(box, ["--workspace", str(tmp_path / "ws"), "--out", str(out), "--net", net],
                    ppn=2)
    assert p.returncode == 0, p.err[-3000:]
    if net == "mlp":
        _check_final(out, 20)
    else:
        import test_sparse
        x, y = test_sparse.embed_data(10 * G * B)
        got = np.load(str(out), allow_pickle=False)
        for i, want in enumerate(test_sparse.reference(test_sparse.EMBED_NET, x, y, G, B)):
            np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)
    placement = re.search(r"Placement: (.*)", p.out + p.err).group(1)
    assert "server 0 (server group 0) on h1" in placement
    assert "server 1 (server group 0) on h2" in placement
    assert "stub 0 on h1" in placement and "stub 1 on h2" in placement


def test_group_over_two_hosts_sums_per_host(cluster_box, tmp_path):
    """One group of 4 workers, 2 per host, 2 servers (one per host): hosts come from MPI's
    shared-memory split, each host sums its 2 workers (stub 0 on h1, stub 0.1 on h2), the weights
    equal the single process (1e-6), and per step each param's gradient and values cross the hosts
    once (its slice's server is on one host, the other host's stub sends its share / gets the
    values): no worker gradient crosses."""
    box = cluster_box(2, rate="1gbit")
    out = tmp_path / "final.npz"
    steps = 10
    p = box_mpiexec(box, ["--workspace", str(tmp_path / "ws"), "--out", str(out), "--groups", "1",
                          "--workers", "4", "--max_iter", str(steps), "--sfb_mode", "NEVER",
                          "--count_crossing"], ppn=2, timeout=60)
    assert p.returncode == 0, p.err[-3000:]
    got = np.load(str(out), allow_pickle=False)
    for i, want in enumerate(reference(1, 4, B, max_iter=steps)):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)
    text = p.out + p.err
    assert "Hosts from MPI's shared-memory split: h1 (ranks 0,1), h2 (ranks 2,3)" in text
    assert re.search(r"group 0: stub 0 @h1:0 sums workers 0,1; stub 0\.1 @h2:2 sums workers 2,3", text)
    crossing = [tuple(int(v) for v in m) for m in re.findall(r"CROSSING grad=(\d+) param=(\d+)", text)]
    assert len(crossing) == 4                      # every rank reported
    params = 4                                     # ip1, ip2: weight and bias, one slice each
    assert sum(g for g, _ in crossing) == params * steps
    assert sum(q for _, q in crossing) == params * (steps + 1)     # + the first values


def _rank_pid(box, host, rank, deadline):
    while time.time() < deadline:
        for pid in box.host_pids(host):
            if is_rank_process(pid, rank):
                return pid
        time.sleep(0.1)
    raise AssertionError("rank %d not found on %s" % (rank, host))


# (what, ranks per host, extra mpi_run args, host of the victim, victim rank or None = whole host,
#  what the line must name)
CASES = {
    "worker": (2, [], "h2", 3, r"rank 3 \(worker 3 \(group 1\)[^)]*\) on host h2 died"),
    "server": (3, ["--separate"], "h2", 5, r"rank 5 \(server 1 \(server group 0\)\) on host h2 died"),
    "coordinator": (2, [], "h1", 0, r"rank 0 \(worker 0 .*coordinator\) on host h1 died"),
    "host": (2, [], "h2", None, r"rank 2 \(.*\) on host h2 died and rank 3 \(.*\) on host h2 died"),
}


@pytest.mark.parametrize("what", sorted(CASES))
def test_lost_rank_stops_job_then_resume(cluster_box, tmp_path, tmp_path_factory, what):
    ppn, extra, host, victim, pattern = CASES[what]
    box = cluster_box(2, rate="10gbit")
    ws = str(tmp_path / "ws")
    args = ["--workspace", ws, "--max_iter", "200", "--checkpoint_frequency", "10",
            "--sleep", "0.02"] + extra
    proc = box_mpiexec(box, args, ppn=ppn, wait=False, auto_cleanup=False)
    deadline = time.time() + 90
    while not os.path.exists(os.path.join(ws, "checkpoint", "step20.manifest")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    if victim is None:
        box.kill_host(host)
    else:
        os.kill(_rank_pid(box, host, victim, deadline), signal.SIGKILL)
    t0 = time.time()
    out, err = proc.communicate(timeout=4 * TIMEOUT)
    assert time.time() - t0 < 2 * TIMEOUT
    assert proc.returncode != 0
    lines = [l for l in err.splitlines() if l.startswith("caffepy dist:")]
    failure = os.path.join(ws, "failure.txt")
    while not os.path.exists(failure) and time.time() - t0 < 2 * TIMEOUT:
        time.sleep(0.05)
    with open(failure) as f:
        written = f.read().strip()
    # Hydra's mpiexec exits when a host's proxy vanishes, and a proxy may die forwarding to a dead
    # rank (even with -disable-auto-cleanup), taking the output forwarding with it: then only the
    # file has the line
    assert len(lines) <= 1, err[-3000:]
    lines = lines or [written]
    assert re.search(pattern, lines[0]), lines[0]
    assert written == lines[0]
    assert "last complete checkpoint: step" in lines[0]
    assert checkpoint.latest_complete(ws)[0] >= 20
    if (os.cpu_count() or 1) < ppn:          # more ranks on a host than cores: said at start
        assert re.search(r"host h1 runs %d ranks on \d+ cores" % ppn, err), err[-3000:]
    box.close()
    box = cluster_box(2, rate="10gbit")
    final = tmp_path / "final.npz"
    done = box_mpiexec(box, args[:6] + ["--resume", "--out", str(final)] + extra, ppn=ppn)
    assert done.returncode == 0, done.err[-3000:]
    assert "RESULT step=200" in done.out
    _check_final(final, 200)
    # BSP with MemoryData feeds: the resumed run is the uninterrupted one, bit for bit
    a, b = np.load(str(final)), np.load(_uninterrupted(box, ppn, extra, tmp_path_factory))
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])


_WHOLE = {}


def _uninterrupted(box, ppn, extra, tmp_path_factory):
    """The final params of the same 200-step run, never interrupted (one run per rank layout)."""
    key = (ppn, tuple(extra))
    if key not in _WHOLE:
        d = tmp_path_factory.mktemp("whole")
        ref = box_mpiexec(box, ["--workspace", str(d / "ws"), "--max_iter", "200", "--out",
                                str(d / "whole.npz")] + extra, ppn=ppn)
        assert ref.returncode == 0, ref.err[-3000:]
        _WHOLE[key] = str(d / "whole.npz")
    return _WHOLE[key]


def _long_job_past_first_checkpoint(box, ws, timeout):
    """Start a long 2-host job (2 ranks per host, heartbeat ``timeout``) and return (its mpiexec,
    a 90 s deadline) once its step-10 checkpoint exists."""
    args = ["--workspace", ws, "--max_iter", "2000", "--checkpoint_frequency", "10", "--sleep",
            "0.02", "--timeout", str(timeout)]
    proc = box_mpiexec(box, args, ppn=2, wait=False, auto_cleanup=False)
    deadline = time.time() + 90
    while not os.path.exists(os.path.join(ws, "checkpoint", "step10.manifest")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    return proc, deadline


def test_hung_rank_is_named_after_timeout(cluster_box, tmp_path):
    """A rank that stops answering without exiting (SIGSTOP: what a host that drops off the network
    looks like) is named after ``timeout / 2`` s of silence, before the roles waiting on it give up
(``timeout``), and the job ends."""
    box = cluster_box(2, rate="10gbit")
    ws, timeout = str(tmp_path / "ws"), 6
    proc, deadline = _long_job_past_first_checkpoint(box, ws, timeout)
    pid = _rank_pid(box, "h2", 3, deadline)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.time()
    try:
        out, err = proc.communicate(timeout=6 * timeout)
    finally:
        os.kill(pid, signal.SIGCONT) if os.path.exists("/proc/%d" % pid) else None
    assert time.time() - t0 < 2 * timeout + 2            # + the abort's own seconds
    with open(os.path.join(ws, "failure.txt")) as f:
        line = f.read().strip()
    assert re.search(r"rank 3 \(worker 3 .*\) on host h2 sent no heartbeat for \d+ s", line), line
    assert "last complete checkpoint: step" in line


def test_first_host_cut_leaves_no_rank_behind(cluster_box, tmp_path):
    """The host of mpiexec, rank 0 and the watchdog loses power (its link goes down first: no FIN
    reaches the other host): the ranks on the other host stop hearing the watchdog and end within
    2 x timeout (Hydra's own proxy there may linger: it has no deadline)."""
    box = cluster_box(2, rate="10gbit")
    ws, timeout = str(tmp_path / "ws"), 6
    proc, deadline = _long_job_past_first_checkpoint(box, ws, timeout)
    _rank_pid(box, "h2", 3, deadline)
    box.kill_host("h1", cut=True)
    t0 = time.time()

    def ranks_left():
        out = []
        for pid in box.host_pids("h2"):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if b"mpi_run.py" in f.read():
                        out.append(pid)
            except OSError:
                pass
        return out
    while time.time() - t0 < 2 * timeout and ranks_left():
        time.sleep(0.1)
    assert not ranks_left(), "ranks left on h2 %.0f s after h1 was cut" % (time.time() - t0)


def test_default_cleanup_line_in_failure_txt(cluster_box, tmp_path):
    """Hydra's default clean-up (no -disable-auto-cleanup): when rank 3 is killed, mpiexec ends
    every rank and itself within tens of ms, before the watchdog's line (its output went through
    rank 0's proxy) can reach the terminal: mpiexec's own lines say a process "terminated badly"
    (or a proxy reports its closed control connection); failure.txt names rank 3 on h2 (rank 2, ended by Hydra on the same host, may be named with it:
    the watchdog cannot tell that from a host's loss)."""
    import launchers as L
    box = cluster_box(2, rate="10gbit")
    ws = str(tmp_path / "ws")
    proc = box_mpiexec(box, L.long_args(ws), ppn=2, wait=False)
    victim = L.rank_pid(box, "h2", 3, time.time() + 60)
    line, shown = L.lost_rank(proc, ws, lambda: os.kill(victim, signal.SIGKILL),
                              r"rank 3 \(worker 3 \(group 1\)\) on host h2 died")
    assert shown in ([], [line]), proc.err[-3000:]
    # Hydra's own report: "BAD TERMINATION" / "terminated badly", or, when rank 0's proxy saw
    # its control socket close first, the proxy's "[proxy:0@h1] ..." assert lines
    assert ("terminated badly" in proc.err or "BAD TERMINATION" in proc.err
            or re.search(r"^\[proxy:\d+@h\d\] ", proc.err, re.M)), proc.err[-3000:]
    # what rank 0 said at start, so the file is found
    assert "a failure report goes to this terminal and to %s" % os.path.join(ws, "failure.txt") \
        in proc.err


def test_workspace_a_host_does_not_see_is_refused(cluster_box, tmp_path):
    """h2 mounts a file system of its own over the workspace's path (a node without the shared
    mount): before training every rank stops with one line naming the ranks and host that
    rank 0 cannot see."""
    box = cluster_box(2, rate="10gbit")
    ws = tmp_path / "ws"
    ws.mkdir()
    r = box.run("h2", ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(ws)])
    assert r.returncode == 0, r.err
    p = box_mpiexec(box, ["--workspace", str(ws)], ppn=2, timeout=90)
    assert p.returncode != 0
    errors = {l for l in p.err.splitlines() if l.startswith("ERROR: ")}
    assert errors == {"ERROR: workspace %s is not shared: rank 0 (host h1) cannot see what rank 2 "
                      "(host h2), rank 3 (host h2) wrote there; put the workspace on a filesystem "
                      "every host mounts at the same path" % ws}, p.err[-3000:]



def test_nfs_workspace_shared_by_two_hosts(cluster_box, tmp_path):
    """h1 exports the workspace with the kernel's NFS server and h2 mounts it at the same path
    (tools/nfs_share.py): BSP across both equals the single process, its checkpoints are complete
    and verified, and h2 reads what h1 wrote. Skips with one line where the kernel has no NFS."""
    import launchers
    launchers._tools()
    import nfs_share as nfs
    reason = nfs.unavailable_reason()
    if reason:
        pytest.skip(reason)
    box = cluster_box(2, rate="10gbit")
    ws = tmp_path / "ws"
    ws.mkdir()
    stop = nfs.share(box, str(ws))
    try:
        (ws / "from_h1").write_text("h1")
        seen = box.run("h2", ["cat", str(ws / "from_h1")])
        assert seen.returncode == 0 and seen.out == "h1", seen.err
        out = tmp_path / "final.npz"
        p = box_mpiexec(box, ["--workspace", str(ws), "--out", str(out), "--checkpoint_frequency",
                              "10"], ppn=2)
        assert p.returncode == 0, p.err[-3000:]
        _check_final(out, 20)
        step, manifest = checkpoint.latest_complete(str(ws), verify=True)
        assert step == 20, manifest
        listed = box.run("h2", ["ls", str(ws / "checkpoint")])
        assert os.path.basename(manifest) in listed.out.split(), listed.out + listed.err
    finally:
        stop()
