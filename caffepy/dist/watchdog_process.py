"""The watchdog process rank 0 starts (``python -m caffepy.dist.watchdog``, see
caffepy.dist.watchdog): it accepts the ranks' connections, checks their handshakes
(caffepy.dist.handshake), watches their heartbeats and reports a lost rank in one line."""
import os
import secrets
import selectors
import signal
import socket
import sys
import time

from .handshake import (HANDSHAKE_TIMEOUT, LINE_MAX, MAX_PENDING, NONCE_BYTES, SECRET_BYTES,
                        WARN_MAX, HandshakeError, check_hello, proof)
GRACE = 0.1      # s: ranks of the first lost rank's host that drop this soon after it are named
                 # with it (a host that dies); those of other hosts follow it (a launcher's clean-up,
                 # MPI's own error handling) and are only counted


def _describe(entry):
    rank, host, roles = entry
    return "rank %d (%s) on host %s" % (rank, roles.replace("_", " ").replace(";", ", "), host)


class _Conn(object):
    """One accepted connection: before its HELLO proved the secret (``rank`` None), then a rank's."""
    __slots__ = ("sock", "peer", "nonce", "buf", "since", "rank")

    def __init__(self, sock, peer, now):
        self.sock, self.peer, self.since = sock, peer, now
        self.nonce = secrets.token_hex(NONCE_BYTES).encode()
        self.buf, self.rank = b"", None


class _Quit(Exception):
    pass


class _Watch(object):
    def __init__(self, workspace, timeout, interval, entries, secret,
                 handshake_timeout=HANDSHAKE_TIMEOUT, max_pending=MAX_PENDING):
        self.workspace, self.timeout, self.interval = workspace, timeout, interval
        self.entries = entries                 # rank -> (rank, host, roles)
        self.secret = secret
        self.handshake_timeout, self.max_pending = handshake_timeout, max_pending
        self.conns, self.last, self.bye = {}, {}, set()   # rank -> _Conn, last heard, said BYE
        self.pending = {}                      # socket -> _Conn not authenticated yet
        self.lost = {}                         # rank -> (time, why)
        self.warned, self.refused = set(), 0
        self.sel = None

    # -- refusals: never fatal, logged once per kind and peer address ------------------------------
    def _warn(self, kind, peer, text):
        self.refused += 1
        key = (kind, peer)
        if key in self.warned or len(self.warned) > WARN_MAX:
            return
        self.warned.add(key)
        if len(self.warned) > WARN_MAX:
            line = "more refused connections are not logged"
        else:
            line = "watchdog: %s from %s: %s (logged once)" % (kind, peer, text)
        try:
            from ..log import warning
            warning("watchdog.py", line)
        except Exception:
            pass

    def _refuse(self, conn, kind, text):
        self._warn(kind, conn.peer, text)
        self._close(conn)

    def _close(self, conn):
        self.pending.pop(conn.sock, None)
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

    # -- the loop --------------------------------------------------------------------------------------
    def run(self, server):
        self.sel = selectors.DefaultSelector()
        server.setblocking(False)
        self.sel.register(server, selectors.EVENT_READ, None)
        start = time.time()
        next_beat = 0.0
        while True:
            try:
                events = self.sel.select(self.interval / 2)
            except InterruptedError:
                events = []
            now = time.time()
            for key, _ in events:
                if key.data is None:
                    self._accept(server, now)
                    continue
                conn = key.data
                try:
                    self._readable(conn, now)
                except _Quit:
                    return self._finish(0)
                except Exception as e:       # whatever one connection does, the watch goes on
                    if conn.rank is None:
                        self._refuse(conn, "error", "%s: %s" % (type(e).__name__, e))
                    else:
                        self._warn("error", conn.peer, "rank %d: %s: %s" % (conn.rank, type(e).__name__, e))
            for conn in list(self.pending.values()):
                if now - conn.since > self.handshake_timeout:
                    self._refuse(conn, "no authentication", "nothing valid in %.0f s"
                                 % self.handshake_timeout)
            for rank, seen in self.last.items():
                if rank in self.conns and rank not in self.bye and now - seen > self.timeout / 2:
                    self.lost.setdefault(rank, (now, "sent no heartbeat for %.0f s" % (now - seen)))
            if now - start > self.timeout:
                for rank in self.entries:
                    if rank not in self.last:
                        self.lost.setdefault(rank, (now, "never reported (in %.0f s)" % self.timeout))
            if self.lost:
                first = min(t for t, _ in self.lost.values())
                if now - first >= GRACE:
                    return self._report(first)
            elif len(self.bye) == len(self.entries) or (0 in self.bye and not self.conns):
                return self._finish(0)
            if now >= next_beat:
                for c in self.conns.values():
                    self._say(c, b"BEAT\n")
                next_beat = now + self.interval

    def _say(self, conn, line):
        try:
            conn.sock.send(line)          # (a few bytes: the socket's buffer takes them)
        except OSError:
            pass

    def _accept(self, server, now):
        for _ in range(64):
            try:
                sock, addr = server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:        # out of descriptors: refuse until some are free
                self._warn("accept failed", "-", str(e))
                return
            peer = addr[0] if isinstance(addr, tuple) else str(addr)
            conn = _Conn(sock, peer, now)
            if len(self.pending) >= self.max_pending:
                self._warn("too many connections", peer, "over %d waiting to authenticate"
                           % self.max_pending)
                sock.close()
                continue
            sock.setblocking(False)
            self.pending[sock] = conn
            self.sel.register(sock, selectors.EVENT_READ, conn)
            self._say(conn, b"CHALLENGE %s\n" % conn.nonce)

    def _readable(self, conn, now):
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        closed = not data
        if conn.rank is None:
            if closed:
                return self._refuse(conn, "closed", "closed before authenticating")
            conn.buf += data
            if b"\n" not in conn.buf:
                if len(conn.buf) >= LINE_MAX:
                    self._refuse(conn, "oversized line", "over %d bytes" % LINE_MAX)
                return
            line, conn.buf = conn.buf.split(b"\n", 1)
            if len(line) >= LINE_MAX:
                return self._refuse(conn, "oversized line", "over %d bytes" % LINE_MAX)
            try:
                rank, cnonce = check_hello(self.secret, line, conn.nonce, self.entries)
            except HandshakeError as e:
                return self._refuse(conn, str(e), "%r" % line[:40])
            if rank in self.conns or rank in self.last:
                return self._refuse(conn, "rank joined twice", "rank %d" % rank)
            del self.pending[conn.sock]
            conn.rank = rank
            self.conns[rank], self.last[rank] = conn, now
            self._say(conn, b"WELCOME %s\n" % proof(self.secret, b"watchdog", rank, cnonce, conn.nonce))
            data = b""
        rank = conn.rank
        if closed:
            self._drop(rank)
            if rank not in self.bye:     # (this event's own time: the first loss names the host)
                self.lost.setdefault(rank, (time.time(), "died"))
            return
        self.last[rank] = now
        conn.buf += data
        while b"\n" in conn.buf:
            line, conn.buf = conn.buf.split(b"\n", 1)
            word = line.strip()
            if word == b"BEAT":
                pass
            elif word == b"BYE":
                self.bye.add(rank)
            elif word == b"QUIT" and rank == 0:
                raise _Quit()
            else:
                self._warn("unknown line", conn.peer, "rank %d: %r" % (rank, line[:40]))
        if len(conn.buf) >= LINE_MAX:
            self._warn("oversized line", conn.peer, "rank %d: over %d bytes" % (rank, LINE_MAX))
            conn.buf = b""

    def _drop(self, rank):
        self._close(self.conns.pop(rank))

    def _report(self, first):
        from .checkpoint import describe_latest
        line = "caffepy dist: %s; the job stops; %s; continue with caffepy train --resume\n" % (
            self._what_was_lost(first), describe_latest(self.workspace))
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except OSError:
            pass            # the launcher's output forwarding is gone: the file below remains
        try:
            from ..proto.io import atomic_write
            atomic_write(os.path.join(self.workspace, "failure.txt"), line.encode())
        except (OSError, ImportError):
            pass
        return self._finish(1)

    def _what_was_lost(self, first):
        """The ranks lost within GRACE of ``first`` on the first lost rank's host, by rank; the
        ranks of other hosts lost in that time are counted after them: when a launcher kills the
        whole job, or MPI ends the ranks that talked to a dead one, they are a consequence."""
        near = sorted((t, r) for r, (t, _) in self.lost.items() if t - first <= GRACE)
        origin = self.entries[near[0][1]][1]
        named = sorted(r for _, r in near if self.entries[r][1] == origin)
        after = sorted(r for _, r in near if self.entries[r][1] != origin)
        text = " and ".join("%s %s" % (_describe(self.entries[r]), self.lost[r][1]) for r in named)
        if after:
            text += " (then rank%s %s ended too)" % ("s" if len(after) > 1 else "",
                                                     ", ".join(str(r) for r in after))
        return text

    def _finish(self, code):
        for conn in list(self.pending.values()):
            self._close(conn)
        for rank, c in self.conns.items():
            if rank not in self.bye:
                self._say(c, b"STOP\n")
        deadline = time.time() + 5
        while self.conns and time.time() < deadline:       # let them abort; then close
            time.sleep(0.05)
            for rank, c in list(self.conns.items()):
                try:
                    if not c.sock.recv(4096):
                        self._drop(rank)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    self._drop(rank)
        for c in list(self.conns.values()):
            self._close(c)
        return code


def listen(host, backlog=128):
    """A listening TCP socket on ``host`` (an IP address), port chosen by the kernel."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, 0))
    server.listen(backlog)
    return server


def main(argv):
    # A scheduler's notice (scancel --signal=TERM, a preemption's SIGTERM) goes to every process of
    # the job step, this one too: the ranks then stop at a common step and say BYE, and the watch
    # must last until they have (it ends by itself then, or by SIGKILL with the job)
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    workspace, timeout, interval, host = argv[0], float(argv[1]), float(argv[2]), argv[3]
    entries = {}
    for a in argv[4:]:
        rank, rhost, roles = a.split("=", 2)
        entries[int(rank)] = (int(rank), rhost, roles)
    try:
        secret = bytes.fromhex(sys.stdin.readline(4 * SECRET_BYTES).strip())
    except ValueError:
        secret = b""
    sys.stdin.close()
    if len(secret) != SECRET_BYTES:
        sys.stdout.write("ERROR no secret on stdin\n")
        return 1
    try:
        server = listen(host)
    except OSError as e:
        sys.stdout.write("ERROR cannot listen on %s (CAFFEPY_WATCHDOG_ADDR): %s\n"
                         % (host, e.strerror or e))
        return 1
    sys.stdout.write("PORT %d\n" % server.getsockname()[1])
    sys.stdout.flush()
    sys.stdout.close()
    from .. import log
    log.setup()
    return _Watch(workspace, timeout, interval, entries, secret).run(server)
