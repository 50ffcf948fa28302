"""Liveness under MPI: heartbeats between every rank and a watchdog process; never local pids.

Rank 0 starts the watchdog (``python -m caffepy.dist.watchdog``) in its own session, so it outlives
the ranks when the launcher tears them down, and tells every rank its address (bound on rank 0's
host, port chosen by the kernel). Each rank's :class:`MpiGuard` keeps one TCP connection to it::

    rank -> watchdog:  HELLO <rank>, then BEAT every heartbeat_interval s; BYE when its roles are
                       done; QUIT (rank 0) when the coordinator ends the job itself
    watchdog -> rank:  BEAT every heartbeat_interval s; STOP when the job must stop

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

``python -m caffepy.dist.watchdog WORKSPACE TIMEOUT INTERVAL RANK=HOST=ROLES ...``: prints its port
on stdout, then watches.
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

ABORT_WAIT = 2.0  # s: then a rank whose MPI_Abort has not ended it exits by itself
GRACE = 0.1      # s: ranks that drop this soon after the first are named with it


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
    host = os.environ.get("CAFFEPY_WATCHDOG_ADDR")
    if host:
        return host
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class MpiGuard(object):
    """One per rank: the connection to the watchdog and the thread that keeps it."""

    def __init__(self, engine, topo, workspace):
        self.engine, self.topo, self.workspace = engine, topo, workspace
        self.rank = engine.rank
        self.interval = topo.cluster.heartbeat_interval
        self.timeout = topo.cluster.timeout
        self.failure = None
        self.finished = threading.Event()
        self.proc = None
        addr = None
        if self.rank == 0:
            args = [sys.executable, "-m", "caffepy.dist.watchdog", workspace, repr(self.timeout),
                    repr(self.interval)] + roster(topo, engine.hosts)
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, start_new_session=True)
            port = self.proc.stdout.readline().strip()
            addr = (_address(), int(port or 0))
        self.addr = engine.comm.bcast(addr, root=0)
        self.sock = socket.create_connection(self.addr, timeout=max(5.0, self.timeout))
        self.sock.sendall(b"HELLO %d\n" % self.rank)
        self.thread = threading.Thread(target=self._keep, name="dist-guard", daemon=True)
        self.thread.start()

    def _send(self, line):
        try:
            self.sock.sendall(line)
        except OSError:
            pass

    def _keep(self):
        last_heard, buf = time.time(), b""
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
                last_heard, buf = now, buf + data
                if self.finished.is_set():          # said BYE: the end of the job is no failure
                    return
                if b"STOP" in buf:
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


class _Watch(object):
    def __init__(self, workspace, timeout, interval, entries):
        self.workspace, self.timeout, self.interval = workspace, timeout, interval
        self.entries = entries                 # rank -> (rank, host, roles)
        self.conns, self.last, self.bye = {}, {}, set()
        self.lost = {}                         # rank -> (time, why)

    def run(self, server):
        start = time.time()
        pending = {}                           # sockets before HELLO -> bytes
        next_beat = 0.0
        while True:
            socks = [server] + list(pending) + list(self.conns.values())
            ready, _, _ = select.select(socks, [], [], self.interval / 2)
            now = time.time()
            for s in ready:
                if s is server:
                    c, _ = server.accept()
                    pending[c] = b""
                    continue
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if s in pending:
                    pending[s] += data
                    if b"\n" in pending[s]:
                        rank = int(pending.pop(s).split()[1])
                        self.conns[rank], self.last[rank] = s, now
                    elif not data:
                        pending.pop(s).close()
                    continue
                rank = next(r for r, c in self.conns.items() if c is s)
                if data:
                    self.last[rank] = now
                    if b"BYE" in data:
                        self.bye.add(rank)
                    if b"QUIT" in data:
                        return self._finish(0)
                    continue
                self._drop(rank)
                if rank not in self.bye:
                    self.lost.setdefault(rank, (now, "died"))
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
                    try:
                        c.sendall(b"BEAT\n")
                    except OSError:
                        pass
                next_beat = now + self.interval

    def _drop(self, rank):
        c = self.conns.pop(rank)
        c.close()

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
        for rank, c in self.conns.items():
            if rank in self.bye:
                continue
            try:
                c.sendall(b"STOP\n")
            except OSError:
                pass
        deadline = time.time() + 5
        while self.conns and time.time() < deadline:       # let them abort; then close
            time.sleep(0.05)
            for rank, c in list(self.conns.items()):
                c.setblocking(False)
                try:
                    if not c.recv(4096):
                        self._drop(rank)
                except BlockingIOError:
                    pass
                except OSError:
                    self._drop(rank)
        return code


def main(argv):
    workspace, timeout, interval = argv[0], float(argv[1]), float(argv[2])
    entries = {}
    for a in argv[3:]:
        rank, host, roles = a.split("=", 2)
        entries[int(rank)] = (int(rank), host, roles)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(len(entries) + 8)
    sys.stdout.write("%d\n" % server.getsockname()[1])
    sys.stdout.flush()
    sys.stdout.close()
    return _Watch(workspace, timeout, interval, entries).run(server)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
