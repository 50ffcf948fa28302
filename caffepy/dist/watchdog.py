"""Liveness under MPI: heartbeats between every rank and a watchdog process; never local pids.

Rank 0 makes the job's secret (32 random bytes), starts the watchdog (``python -m
caffepy.dist.watchdog``) in its own session, so it outlives the ranks when the launcher tears them
down, hands it the secret on its stdin (never the command line, the environment or a file), and
gives every rank the watchdog's address (bound on rank 0's host, port chosen by the kernel) and the
secret over MPI. Each rank's :class:`MpiGuard` keeps one TCP connection to it, opened with the handshake of
:mod:`caffepy.dist.handshake` (challenge, HMAC proofs both ways); the watchdog process is
:mod:`caffepy.dist.watchdog_process`.

What a connection must prove, and the limits on what it may send, are in
:mod:`caffepy.dist.handshake`; no connection's input or error ends the watchdog. It listens on
the address the ranks connect to: ``$CAFFEPY_WATCHDOG_ADDR`` on rank 0 (an address or a host name
of rank 0's host) or, without it, the address rank 0's host name resolves to (docs/security.md).

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

import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from .handshake import HANDSHAKE_TIMEOUT, LINE_MAX, SECRET_BYTES, HandshakeError, join, new_secret
from .watchdog_process import _describe

ABORT_WAIT = 2.0  # s: then a rank whose MPI_Abort has not ended it exits by itself


def roster(topo, hosts):
    """``RANK=HOST=ROLES`` for every rank (roles joined by ';', spaces as '_')."""
    out = []
    for r in range(topo.n_processes):
        roles = ";".join(topo.describe(ep) for ep in topo.endpoints_of_process(r))
        out.append("%d=%s=%s" % (r, hosts[r], roles.replace(" ", "_")))
    return out


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
        if self.rank == 0:        # (a launcher that ends every rank at once may cut the line off)
            from ..log import info
            info("watchdog.py", "Watchdog at %s:%s; a failure report goes to this terminal and to "
                 "%s" % (host, port, os.path.join(workspace, "failure.txt")))
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


if __name__ == "__main__":
    from .watchdog_process import main
    sys.exit(main(sys.argv[1:]))
