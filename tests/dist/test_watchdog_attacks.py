"""The watchdog's control plane against strangers: each attack on a running 2-rank BSP job leaves
it finishing normally (exit 0, the single-process weights, no failure line, no failure.txt)."""
import os
import socket
import time

import numpy as np
import pytest

from conftest import mpiexec, needs_mpi, reference
from caffepy.dist import handshake as hs
from watch_probe import connect as _connect, drain as _drain

G, K, B = 2, 1, 4                 # 2 ranks: 2 groups of 1 worker, 1 co-located server


# -- a real job ------------------------------------------------------------------------------------
def _listening(pid):
    """(address, port) of the TCP socket process ``pid`` listens on, else None."""
    try:
        inodes = {os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)}
    except OSError:
        return None
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%s/net/%s" % (pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and "socket:[%s]" % fields[9] in inodes:
                ip, port = fields[1].split(":")
                raw = bytes.fromhex(ip)
                if table == "tcp":
                    host = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:
                    host = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1]
                                                                      for i in range(0, 16, 4)))
                return host, int(port, 16)
    return None


def _watchdog_address(workspace, proc, deadline=60):
    """Where the watchdog of the job using ``workspace`` listens (found through /proc)."""
    end = time.time() + deadline
    while time.time() < end and proc.poll() is None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if b"caffepy.dist.watchdog" in cmd and workspace.encode() in cmd:
                addr = _listening(pid)
                if addr:
                    return addr
        time.sleep(0.05)
    pytest.fail("no watchdog listening for %s" % workspace)


def _job(tmp_path, attack, sleep=0.1):
    """Start the job, run ``attack(address)`` while it trains, check it ends as if untouched;
    returns its stderr."""
    ws, out = str(tmp_path / "ws"), tmp_path / "final.npz"
    proc = mpiexec(G * K, ["--workspace", ws, "--out", str(out), "--groups", str(G), "--workers",
                           str(K), "--servers", "1", "--batch", str(B), "--slow_worker", "0",
                           "--slow_delay", str(sleep)],
                   wait=False)
    try:
        addr = _watchdog_address(ws, proc)
        attack(addr)
        assert proc.poll() is None, "the job ended before the attack was over"
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert not os.path.exists(os.path.join(ws, "failure.txt"))
    assert " lost" not in err and "the job stops" not in err, err[-2000:]
    got = np.load(str(out), allow_pickle=False)
    for i, want in enumerate(reference(G, K, B)):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)
    return err, addr


def _one_warning(err, kind):
    lines = [l for l in err.splitlines() if "watchdog: %s from" % kind in l]
    assert len(lines) == 1, (kind, err[-3000:])


@pytest.mark.slow
@needs_mpi
def test_http_probe(tmp_path):
    def attack(addr):
        with _connect(addr) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert _drain(s).startswith(b"CHALLENGE ")       # ... and closed
    err, _ = _job(tmp_path, attack)
    _one_warning(err, "malformed")


@pytest.mark.slow
@needs_mpi
def test_random_garbage(tmp_path):
    rng = np.random.default_rng(3)

    def attack(addr):
        for _ in range(3):
            with _connect(addr) as s:
                try:
                    s.sendall(rng.integers(0, 256, 64 << 10, dtype=np.uint8).tobytes())
                except OSError:
                    pass                                     # closed while we sent: refused
                assert not _drain(s).endswith(b"<open>")
    _job(tmp_path, attack)


@pytest.mark.slow
@needs_mpi
def test_spoofed_hello_then_hang_up(tmp_path):
    def attack(addr):
        for line in (b"HELLO 1\n", b"HELLO 1 %s %s\n" % (b"a" * 64, b"b" * 64), b"HELLO 0\n"):
            with _connect(addr) as s:
                s.sendall(line)
        time.sleep(0.3)                                      # (the old watchdog named rank 1 lost)
    err, _ = _job(tmp_path, attack)
    _one_warning(err, "wrong proof")


@pytest.mark.slow
@needs_mpi
def test_spoofed_bye_and_quit(tmp_path):
    def attack(addr):
        for lines in (b"HELLO 0\nQUIT\n", b"QUIT\n", b"BYE\n", b"HELLO 1\nBYE\n",
                      b"HELLO 0 %s %s\nQUIT\n" % (b"0" * 64, b"0" * 64)):
            with _connect(addr) as s:
                s.sendall(lines)
                assert not _drain(s).endswith(b"<open>")
        time.sleep(0.3)
    _job(tmp_path, attack)


@pytest.mark.slow
@needs_mpi
def test_flood_of_connections(tmp_path):
    def attack(addr):
        socks, end = [], time.time() + 10
        try:
            for _ in range(200):
                if time.time() > end:
                    break
                try:
                    socks.append(socket.create_connection(addr, timeout=2))
                except OSError:
                    pass
            time.sleep(0.5)
        finally:
            for s in socks:
                s.close()
        assert len(socks) >= 100
    err, _ = _job(tmp_path, attack, sleep=0.15)
    _one_warning(err, "too many connections")


@pytest.mark.slow
@needs_mpi
def test_half_open_connection_is_dropped(tmp_path):
    def attack(addr):
        with _connect(addr) as s:
            t0 = time.time()
            got = _drain(s, hs.HANDSHAKE_TIMEOUT + 3)
            assert got.startswith(b"CHALLENGE ") and not got.endswith(b"<open>")
            assert hs.HANDSHAKE_TIMEOUT - 0.5 < time.time() - t0 < hs.HANDSHAKE_TIMEOUT + 3
    err, _ = _job(tmp_path, attack, sleep=0.35)
    _one_warning(err, "no authentication")


@pytest.mark.slow
@needs_mpi
def test_binds_the_address_the_ranks_use(tmp_path, monkeypatch):
    """CAFFEPY_WATCHDOG_ADDR picks the address: the watchdog listens there only (never 0.0.0.0)."""
    monkeypatch.setenv("CAFFEPY_WATCHDOG_ADDR", "127.0.0.2")
    seen = []

    def attack(addr):
        seen.append(addr)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", addr[1]), timeout=2).close()
    _job(tmp_path, attack, sleep=0.05)
    assert seen[0][0] == "127.0.0.2"
