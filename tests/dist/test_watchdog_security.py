"""The watchdog's handshake in process (no MPI): proofs, replays, oversized lines, silent and
flooding connections; the rank's check of the watchdog; tools/cluster.py's launch broker."""
import os
import socket
import threading
import time

import pytest

from caffepy.dist import handshake as hs
from caffepy.dist import watchdog_process as wp
from watch_probe import connect as _connect, drain as _drain

SECRET = b"s" * hs.SECRET_BYTES


# -- the handshake in process ------------------------------------------------------------------------
class _Running(object):
    """A watchdog loop in a thread, for ranks 0 and 1, on 127.0.0.1."""

    def __init__(self, tmp_path, **kw):
        self.server = wp.listen("127.0.0.1")
        self.addr = self.server.getsockname()[:2]
        entries = {r: (r, "here", "worker_%d" % r) for r in (0, 1)}
        self.watch = wp._Watch(str(tmp_path), 60.0, 0.1, entries, SECRET, **kw)
        self.code = []
        self.thread = threading.Thread(target=lambda: self.code.append(self.watch.run(self.server)),
                                       daemon=True)
        self.thread.start()

    def finish(self, ranks=(0, 1)):
        """The ranks join and say BYE: the loop ends with 0 (it survived what came before)."""
        joined = [hs.join(self.addr, SECRET, r)[0] for r in ranks]
        for s in joined[::-1]:
            s.sendall(b"BYE\n")
            s.close()
        self.thread.join(10)
        self.server.close()
        assert self.code == [0]
        assert not self.watch.lost


def _challenge(addr):
    s = _connect(addr)
    line, _ = hs._read_line(s, time.time() + 5)
    kind, nonce = line.split()
    assert kind == b"CHALLENGE"
    return s, nonce


def test_wrong_hmac_is_rejected(tmp_path):
    w = _Running(tmp_path)
    s, nonce = _challenge(w.addr)
    cnonce = b"c" * 64
    s.sendall(b"HELLO 1 %s %s\n" % (cnonce, hs.proof(b"x" * 32, b"rank", 1, nonce, cnonce)))
    assert _drain(s) == b""
    assert 1 not in w.watch.conns and ("wrong proof", "127.0.0.1") in w.watch.warned
    w.finish()


def test_answer_replayed_to_another_nonce_is_rejected(tmp_path):
    w = _Running(tmp_path)
    first, nonce1 = _challenge(w.addr)
    cnonce = b"d" * 64
    hello = b"HELLO 1 %s %s\n" % (cnonce, hs.proof(SECRET, b"rank", 1, nonce1, cnonce))
    second, nonce2 = _challenge(w.addr)
    assert nonce1 != nonce2
    second.sendall(hello)
    assert _drain(second) == b""
    assert 1 not in w.watch.conns and ("wrong proof", "127.0.0.1") in w.watch.warned
    first.sendall(hello)                     # the same answer to its own nonce is accepted
    assert _drain(first, 1.0).startswith(b"WELCOME ")
    first.sendall(b"BYE\n")
    first.close()
    w.finish(ranks=(0,))


def test_oversized_line_is_dropped(tmp_path):
    w = _Running(tmp_path)
    s, _ = _challenge(w.addr)
    try:
        s.sendall(b"H" * (hs.LINE_MAX + 10))
    except OSError:
        pass
    assert _drain(s) == b""
    assert ("oversized line", "127.0.0.1") in w.watch.warned
    w.finish()


def test_silent_connection_dropped_after_deadline_and_flood_capped(tmp_path):
    w = _Running(tmp_path, handshake_timeout=0.5, max_pending=4)
    silent = [_connect(w.addr) for _ in range(8)]
    t0 = time.time()
    results = [_drain(s, 3.0) for s in silent]
    assert all(not r.endswith(b"<open>") for r in results)
    assert sum(r.startswith(b"CHALLENGE") for r in results) == 4      # 4 more closed on accept
    assert time.time() - t0 < 3.0
    assert ("too many connections", "127.0.0.1") in w.watch.warned
    assert ("no authentication", "127.0.0.1") in w.watch.warned
    for s in silent:
        s.close()
    w.finish()


def test_a_connection_that_raises_does_not_end_the_watch(tmp_path, monkeypatch):
    w = _Running(tmp_path)
    real = hs.check_hello
    calls = []

    def boom(*a):
        if not calls:
            calls.append(1)
            raise RuntimeError("bug")
        return real(*a)
    monkeypatch.setattr(wp, "check_hello", boom)
    s, _ = _challenge(w.addr)
    s.sendall(b"HELLO 1 x y\n")
    assert _drain(s) == b""
    assert ("error", "127.0.0.1") in w.watch.warned
    w.finish()


def test_spoofed_hello_hang_up_and_quit_count_for_nothing(tmp_path):
    w = _Running(tmp_path)
    for lines in (b"HELLO 1\n", b"HELLO 0\nQUIT\n", b"QUIT\nBYE\n"):
        s, _ = _challenge(w.addr)
        s.sendall(lines)
        assert _drain(s) == b""
        s.close()
    time.sleep(0.3)
    assert w.thread.is_alive() and not w.watch.lost and not w.watch.bye
    w.finish()


def test_rank_checks_the_watchdog_proof(tmp_path):
    """A watchdog that does not know the secret cannot pass for the job's (mutual)."""
    w = _Running(tmp_path)
    with pytest.raises(hs.HandshakeError):
        hs.join(w.addr, b"y" * 32, 1)          # its HELLO is refused: the connection closes
    impostor = wp.listen("127.0.0.1")

    def serve():
        c, _ = impostor.accept()
        c.sendall(b"CHALLENGE %s\n" % (b"e" * 64))
        c.recv(1024)
        c.sendall(b"WELCOME %s\n" % (b"f" * 64))
        time.sleep(0.5)
        c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with pytest.raises(hs.HandshakeError, match="did not prove"):
        hs.join(impostor.getsockname()[:2], SECRET, 0)
    t.join(5)
    impostor.close()
    w.finish()


def test_check_hello():
    nonce, cnonce = b"1" * 64, b"2" * 64
    good = b"HELLO 1 %s %s" % (cnonce, hs.proof(SECRET, b"rank", 1, nonce, cnonce))
    assert hs.check_hello(SECRET, good, nonce, {0: 0, 1: 1}) == (1, cnonce)
    bad = [b"GET / HTTP/1.0", b"HELLO 1", b"HELLO 7 %s %s" % (cnonce, b"0" * 64),
           b"HELLO -1 %s %s" % (cnonce, b"0" * 64), b"\xff\xfe garbage",
           good.replace(b"HELLO 1", b"HELLO 0"),                 # another rank's claim
           b"HELLO 1 %s %s" % (cnonce, hs.proof(SECRET, b"watchdog", 1, nonce, cnonce))]
    for line in bad:
        with pytest.raises(hs.HandshakeError):
            hs.check_hello(SECRET, line, nonce, {0: 0, 1: 1})
    with pytest.raises(hs.HandshakeError):
        hs.check_hello(SECRET, good, b"3" * 64, {0: 0, 1: 1})


# -- tools/cluster.py's launch broker ---------------------------------------------------------------
def _broker_module():
    import importlib.util
    from conftest import ROOT
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    spec = importlib.util.spec_from_file_location("cluster_launch_t",
                                                  os.path.join(ROOT, "tools", "cluster_launch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_broker_socket_private_and_requests_checked(tmp_path, capfd):
    import array
    import json
    import struct
    mod = _broker_module()

    class Box(object):
        pids, procs, hangup = {"h1": 1}, [], True
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(str(open_dir), 0o755)
    with pytest.raises(RuntimeError, match="0700"):
        mod.Broker(Box(), str(open_dir / "launch.sock"))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    broker = mod.Broker(Box(), str(private / "launch.sock"))
    try:
        assert os.stat(broker.path).st_mode & 0o777 == 0o600

        def ask(payload, fds=(0, 1, 2)):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            s.connect(broker.path)
            s.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                       if fds else [])
            try:
                return s.recv(4)                       # b"": refused and closed
            finally:
                s.close()
        req = {"host": "nowhere", "cmd": "true", "cwd": "/", "env": {}}
        msg = json.dumps(req).encode()
        assert ask(struct.pack("!I", len(msg)) + msg) == b""                   # unknown host
        assert ask(struct.pack("!I", 1 << 30) + b"{}") == b""                  # oversized
        assert ask(b"\x00\x00\x00\x05garbage") == b""                          # not JSON
        msg = json.dumps(dict(req, host="h1")).encode()
        assert ask(struct.pack("!I", len(msg)) + msg, fds=()) == b""           # no descriptors
        msg = json.dumps(dict(req, host="h1", env={"A": 1})).encode()
        assert ask(struct.pack("!I", len(msg)) + msg) == b""                   # malformed env
        assert ask(struct.pack("!I", 1 << 30) + b"{}") == b""                  # still serving
        time.sleep(0.2)
        err = capfd.readouterr().err
        assert err.count("refused a launch request") == 5, err
        assert not Box.procs
    finally:
        broker.close()
