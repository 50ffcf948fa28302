"""tools/cluster.py: emulated hosts with their own hostname, PID space and capped link; mpiexec
starts ranks across them; teardown leaves no process or namespace behind."""
import os
import subprocess
import time

import pytest

from conftest import needs_mpi

pytestmark = pytest.mark.slow


def _qdisc(box, host):
    return box.run(host, ["tc", "qdisc", "show", "dev", "eth0"]).out


def test_hosts_are_separate_machines(cluster_box):
    box = cluster_box(2, rate="1gbit")
    for h in ("h1", "h2"):
        r = box.run(h, ["sh", "-c", "hostname; echo $$; ip -o -4 addr show eth0"])
        name, pid, addr = r.out.splitlines()
        assert name == h
        assert int(pid) < 100                       # a fresh PID space
        assert box.address(h) + "/24" in addr
        assert "tbf" in _qdisc(box, h) and "1Gbit" in _qdisc(box, h)
    # each host's /dev/shm is its own: a file one host leaves there (a killed MPI rank's
    # shared-memory segment) is not seen by the other host, the machine or the next cluster
    mark = "caffepy-box-shm-%d" % os.getpid()
    assert box.run("h1", ["touch", "/dev/shm/" + mark]).returncode == 0
    assert mark in box.run("h1", ["ls", "/dev/shm"]).out
    assert mark not in box.run("h2", ["ls", "/dev/shm"]).out
    assert not os.path.exists("/dev/shm/" + mark)
    holders = list(box.pids.values())
    box.close()
    for pid in holders:
        assert not os.path.exists("/proc/%d" % pid)


@needs_mpi
def test_mpiexec_across_hosts_and_kill_host(cluster_box):
    box = cluster_box(2)
    code = ("from mpi4py import MPI; import socket; "
            "c = MPI.COMM_WORLD; rows = c.gather('%d %s %d' % (c.rank, socket.gethostname(), "
            "c.allreduce(c.rank))); c.rank or print(chr(10).join(rows))")
    cmd = [os.environ.get("PYTHON", "python3"), "-c", code]
    p = box.mpiexec(cmd, ppn=2, env=box.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err[-2000:]
    lines = sorted(tuple(l.split()) for l in out.splitlines())
    assert lines == [("0", "h1", "6"), ("1", "h1", "6"), ("2", "h2", "6"), ("3", "h2", "6")]
    sleeper = box.popen("h2", ["sleep", "100"])
    deadline = time.time() + 10
    while len(box.host_pids("h2")) < 2 and time.time() < deadline:     # nsenter forks it
        time.sleep(0.05)
    assert len(box.host_pids("h2")) >= 2
    box.kill_host("h2")
    assert sleeper.wait(timeout=10) != 0
