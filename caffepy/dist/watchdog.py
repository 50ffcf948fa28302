"""Liveness under MPI: heartbeats between every rank and a watchdog process; never local pids.

Rank 0 makes the job's secret (32 random bytes), starts the watchdog (``python -m
caffepy.dist.watchdog``) in its own session, so it outlives the ranks when the launcher tears them
down, hands it the secret on its stdin (never the command line, the environment or a file), and
gives every rank the watchdog's address (bound on rank 0's host, port chosen by the kernel) and the
secret over MPI. Each rank's :class:`MpiGuard` keeps one TCP connection to it. Lines end in
``\n`` and hold at most ``LINE_MAX`` bytes::

    watchdog -> peer:  CHALLENGE <nonce>              (on accept: 32 random bytes, hex)
    rank -> watchdog:  HELLO <rank> <cnonce> <mac>    mac = HMAC-SHA256(secret, "caffepy-watchdog-1|
                                                        rank|<rank>|<nonce>|<cnonce>")
    watchdog -> rank:  WELCOME <mac>                  mac = HMAC-SHA256(secret, "caffepy-watchdog-1|
                                                        watchdog|<rank>|<cnonce>|<nonce>")
    then rank -> watchdog:  BEAT every heartbeat_interval s; BYE when its roles are done; QUIT
                            (rank 0) when the coordinator ends the job itself
         watchdog -> rank:  BEAT every heartbeat_interval s; STOP when the job must stop

Nothing a connection says counts before its HELLO proved the secret (:func:`proof`, compared with
``hmac.compare_digest``); the rank checks the WELCOME the same way (a process that is not the
job's watchdog cannot stop it). A connection that has not authenticated within
``HANDSHAKE_TIMEOUT`` s, sends a line over ``LINE_MAX`` bytes, a malformed line or a wrong proof is
closed; at most ``MAX_PENDING`` connections wait to authenticate at once (more are closed on
accept). Each kind of refusal is logged once per peer address (one WARNING line, at most
``WARN_MAX`` in all); no connection's input or error ends the watchdog. Only an authenticated
connection's loss is a rank's death, only its BYE / QUIT count. It listens on the address the
ranks connect to: ``$CAFFEPY_WATCHDOG_ADDR`` on rank 0 (an address or a host name of rank 0's host)
or, without it, the address rank 0's host name resolves to (docs/security.md).

The watchdog decides that a rank is lost when its connection closes before BYE (the process died,
or its host did) or when it sent nothing for ``timeout / 2`` s (hung, or its host unreachable:
named before any role's own wait, ``timeout`` s, gives up on it); it then prints ONE line naming
the rank(s), their roles and host and the last complete checkpoint (also written to
``<workspace>/failure.txt``: Hydra's default clean-up kills every rank, and with it the output
forwarding, as soon as one process dies; ``mpiexec -disable-auto-cleanup`` keeps the ranks alive
until the watchdog has spoken), sends STOP to every rank still connected and exits. A rank that
gets STOP, or stops hearing the watchdog for ``timeout / 2`` s (rank 0's host is gone), calls
``MPI_Abort``, which ends the job on every host (and exits by itself ``ABORT_WAIT`` s later if the
abort could not reach the launcher). When rank 0's host is lost, the lowest rank on another host
prints the line.

``python -m caffepy.dist.watchdog WORKSPACE TIMEOUT INTERVAL ADDRESS RANK=HOST=ROLES ...``: reads
the secret (hex) from stdin, prints ``PORT <port>`` (or ``ERROR <why>``) on stdout, then watches.
"""
import hashlib
import hmac
import math
import os
import secrets
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

ABORT_WAIT = 2.0  # s: then a rank whose MPI_Abort has not ended it exits by itself
GRACE = 0.1      # s: ranks that drop this soon after the first are named with it
PROTOCOL = b"caffepy-watchdog-1"
SECRET_BYTES = 32
NONCE_BYTES = 32
LINE_MAX = 256            # bytes in one line, its newline included
HANDSHAKE_TIMEOUT = 5.0   # s a connection has to authenticate
MAX_PENDING = 64          # connections waiting to authenticate at once
WARN_MAX = 100            # refusal warnings in all (then one line says the rest are not logged)


class HandshakeError(Exception):
    """A peer did not prove that it knows the job's secret (or broke the protocol)."""


def new_secret():
    return secrets.token_bytes(SECRET_BYTES)


def proof(secret, role, rank, nonce, other):
    """HMAC-SHA256(secret, PROTOCOL|role|rank|nonce|other), hex (bytes): ``role`` b"rank" answers
    the watchdog's ``nonce``; b"watchdog" answers the rank's."""
    msg = b"|".join([PROTOCOL, role, b"%d" % rank, nonce, other])
    return hmac.new(secret, msg, hashlib.sha256).hexdigest().encode()


def _is_hex(b, n):
    return len(b) == n and all(c in b"0123456789abcdef" for c in b)


def check_hello(secret, line, nonce, ranks):
    """The rank a ``HELLO`` line proves (its client nonce too); HandshakeError(kind) otherwise."""
    parts = line.split()
    if len(parts) != 4 or parts[0] != b"HELLO":
        raise HandshakeError("malformed")
    _, rank, cnonce, mac = parts
    if not (rank.isdigit() and len(rank) <= 9) or int(rank) not in ranks:
        raise HandshakeError("malformed")
    if not _is_hex(cnonce, 2 * NONCE_BYTES) or not _is_hex(mac, 64):
        raise HandshakeError("malformed")
    if not hmac.compare_digest(mac, proof(secret, b"rank", int(rank), nonce, cnonce)):
        raise HandshakeError("wrong proof")
    return int(rank), cnonce


def _read_line(sock, deadline, buf=b""):
    while b"\n" not in buf:
        if len(buf) >= LINE_MAX:
            raise HandshakeError("the watchdog sent a line over %d bytes" % LINE_MAX)
        left = deadline - time.time()
        if left <= 0:
            raise HandshakeError("the watchdog did not answer in %.0f s" % HANDSHAKE_TIMEOUT)
        sock.settimeout(left)
        data = sock.recv(LINE_MAX)
        if not data:
            raise HandshakeError("the watchdog closed the connection")
        buf += data
    line, rest = buf.split(b"\n", 1)
    if len(line) >= LINE_MAX:
        raise HandshakeError("the watchdog sent a line over %d bytes" % LINE_MAX)
    return line, rest


def join(addr, secret, rank, timeout=HANDSHAKE_TIMEOUT):
    """Connect to the watchdog at ``addr`` as ``rank``: answer its challenge, check its proof.
    Returns the connected socket (and any bytes read past the handshake); raises OSError or
    HandshakeError."""
    sock = socket.create_connection(addr, timeout=timeout)
    try:
        deadline = time.time() + timeout
        line, rest = _read_line(sock, deadline)
        parts = line.split()
        if len(parts) != 2 or parts[0] != b"CHALLENGE" or not _is_hex(parts[1], 2 * NONCE_BYTES):
            raise HandshakeError("the watchdog sent no challenge")
        nonce, cnonce = parts[1], secrets.token_hex(NONCE_BYTES).encode()
        sock.sendall(b"HELLO %d %s %s\n" % (rank, cnonce, proof(secret, b"rank", rank, nonce, cnonce)))
        line, rest = _read_line(sock, deadline, rest)
        parts = line.split()
        if (len(parts) != 2 or parts[0] != b"WELCOME" or not hmac.compare_digest(
                parts[1], proof(secret, b"watchdog", rank, cnonce, nonce))):
            raise HandshakeError("the peer at %s:%d did not prove the job's secret" % addr[:2])
        return sock, rest
    except BaseException:
        sock.close()
        raise


def roster(topo, hosts):
    """``RANK=HOST=ROLES`` for every rank (roles joined by ';', spaces as '_')."""
    out = []
    for r in range(topo.n_processes):
        roles = ";".join(topo.describe(ep) for ep in topo.endpoints_of_process(r))
        out.append("%d=%s=%s" % (r, hosts[r], roles.replace(" ", "_")))
    return out


def _describe(entry):
    rank, host, roles = entry
    return "rank %d (%s) on host %s" % (rank, roles.replace("_", " ").replace(";", ", "), host)


def _address():
    """The address the watchdog listens on and the ranks connect to (an IP address):
    ``$CAFFEPY_WATCHDOG_ADDR`` (an address or host name of this host), else this host's name's."""
    host = os.environ.get("CAFFEPY_WATCHDOG_ADDR", "").strip()
    try:
        return socket.getaddrinfo(host or socket.gethostname(), None,
                                  type=socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError, UnicodeError):
        if host:
            from ..errors import CaffeError
            raise CaffeError("CAFFEPY_WATCHDOG_ADDR=%s: not an address or a host name that "
                             "resolves" % host)
        return "127.0.0.1"


def _bcast_secret(comm, secret):
    import numpy as np
    buf = np.frombuffer(secret, np.uint8).copy() if secret is not None else np.empty(SECRET_BYTES, np.uint8)
    comm.Bcast(buf, root=0)
    return buf.tobytes()


class MpiGuard(object):
    """One per rank: the connection to the watchdog and the thread that keeps it."""

    def __init__(self, engine, topo, workspace):
        from ..errors import CaffeError
        from .workspace import _bcast_text
        self.engine, self.topo, self.workspace = engine, topo, workspace
        self.rank = engine.rank
        self.interval = topo.cluster.heartbeat_interval
        self.timeout = topo.cluster.timeout
        self.failure = None
        self.finished = threading.Event()
        self.proc = None
        said, secret = "", None
        if self.rank == 0:
            secret = new_secret()
            try:
                said = self._start_watchdog(secret)
            except CaffeError as e:
                said = "ERROR %s" % e
        said = _bcast_text(engine.comm, said, self.rank)
        secret = _bcast_secret(engine.comm, secret)
        if not said.startswith("PORT "):
            raise CaffeError("the watchdog did not start: %s" % (said[6:] if said.startswith("ERROR ")
                                                                 else "it printed %r" % said))
        host, port = said[5:].rsplit(" ", 1)
        self.addr = (host, int(port))
        self.sock, self.rest = self._join(secret)
        self.thread = threading.Thread(target=self._keep, name="dist-guard", daemon=True)
        self.thread.start()

    def _start_watchdog(self, secret):
        host = _address()
        args = [sys.executable, "-m", "caffepy.dist.watchdog", self.workspace, repr(self.timeout),
                repr(self.interval), host] + roster(self.topo, self.engine.hosts)
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     start_new_session=True)
        try:
            self.proc.stdin.write(secret.hex().encode() + b"\n")
            self.proc.stdin.close()
        except OSError:
            pass
        said = self.proc.stdout.readline(LINE_MAX).decode("utf-8", "replace").strip()
        if said.startswith("PORT "):
            said = "PORT %s %s" % (host, said[5:])
        return said or "ERROR it exited (status %s)" % self.proc.wait()

    def _join(self, secret):
        """Connect and authenticate; retried (a flood of strangers may hold the watchdog's queue)
        for up to ``max(5, timeout)`` s."""
        from ..errors import CaffeError
        deadline = time.time() + max(5.0, self.timeout)
        while True:
            try:
                return join(self.addr, secret, self.rank, timeout=min(HANDSHAKE_TIMEOUT, max(
                    1.0, deadline - time.time())))
            except (OSError, HandshakeError) as e:
                if time.time() >= deadline:
                    raise CaffeError("rank %d cannot join the watchdog at %s:%d: %s"
                                     % ((self.rank,) + self.addr + (e,)))
                time.sleep(0.2)

    def _send(self, line):
        try:
            self.sock.sendall(line)
        except OSError:
            pass

    def _keep(self):
        last_heard, buf = time.time(), self.rest
        self.sock.settimeout(None)
        while not self.finished.is_set():
            ready, _, _ = select.select([self.sock], [], [], self.interval)
            now = time.time()
            if ready:
                try:
                    data = self.sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    if not self.finished.is_set():
                        self._watchdog_lost("its connection closed")
                    return
                last_heard, buf = now, (buf + data)[-LINE_MAX:]
                if self.finished.is_set():          # said BYE: the end of the job is no failure
                    return
                if b"STOP\n" in buf:
                    self._stop(None)
                    return
            elif now - last_heard > self.timeout / 2:
                self._watchdog_lost("silent for %.0f s" % (now - last_heard))
                return
            self._send(b"BEAT\n")

    def _watchdog_lost(self, why):
        from .checkpoint import describe_latest
        hosts = self.engine.hosts
        others = [r for r in range(len(hosts)) if hosts[r] != hosts[0]]
        if others and self.rank == min(others):
            entry = (0, hosts[0], ";".join(self.topo.describe(ep)
                                          for ep in self.topo.endpoints_of_process(0)))
            self._stop("%s was lost (the watchdog on host %s: %s); the job stops; %s; continue "
                       "with caffepy train --resume" % (_describe(entry), hosts[0], why,
                                                       describe_latest(self.workspace)))
        else:
            time.sleep(2 * self.interval)        # the reporter aborts the job first
            self._stop(None)

    def _stop(self, message):
        self.failure = message or "the watchdog stopped the job"
        if message:
            sys.stderr.write("caffepy dist: %s\n" % message)
            sys.stderr.flush()
        # MPI_Abort may hang (the launcher's host is gone) without releasing the GIL: SIGALRM's
        # default action ends the process without Python's help
        signal.alarm(int(math.ceil(ABORT_WAIT)))
        self.engine.comm.Abort(1)

    # -- used by the trainer ------------------------------------------------------------------------
    def health(self, h=None):
        if self.failure:
            from .coordinator import DistError
            raise DistError(self.failure)

    def serve(self, proc):
        """Other ranks: wait until the local roles are done (STOP) or the guard stops the job."""
        while any(t.is_alive() for t in proc.threads) and self.failure is None:
            for t in proc.threads:
                t.join(self.interval / max(1, len(proc.threads)))
        proc.stopping.set()

    def done(self):
        """This rank's roles finished: say BYE and close (rank 0: the watchdog then exits)."""
        self.finished.set()
        self._send(b"BYE\n")
        self.sock.close()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=max(10.0, 2 * self.timeout))
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def abort(self, message):
        """Rank 0 ends the job itself (a role failed): one line, then MPI_Abort."""
        self.finished.set()
        self._send(b"QUIT\n")
        self._stop(message)



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
            if rank not in self.bye:
                self.lost.setdefault(rank, (now, "died"))
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
        named = sorted(r for r, (t, _) in self.lost.items() if t - first <= GRACE)
        parts = ["%s %s" % (_describe(self.entries[r]), self.lost[r][1]) for r in named]
        line = ("caffepy dist: %s; the job stops; %s; continue with caffepy train --resume\n"
                % (" and ".join(parts), describe_latest(self.workspace)))
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
