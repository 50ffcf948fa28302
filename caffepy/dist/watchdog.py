"""Failure detection under MPI: heartbeats to the coordinator, and a watchdog process.

:class:`MpiGuard` (one per rank): ranks other than 0 send a ``HEARTBEAT`` every
``heartbeat_interval`` s; the coordinator's ``health`` check stops the job when a rank has been
silent for ``timeout`` s (a hung process). A killed process (``kill -9``) makes mpiexec kill the
whole job at once, leaving no rank to explain; so rank 0 starts this module as a separate process
(its own session, so it outlives the ranks) that waits on the ranks' pidfds and, when one
exits before rank 0 said "done", prints one line naming the rank, its roles and pid and the
last complete checkpoint, then exits. ``python -m caffepy.dist.watchdog WORKSPACE PID:ROLES ...``.
"""
import os
import subprocess
import sys
import threading
import time

from . import transport as T


class MpiGuard(object):
    def __init__(self, engine, topo, workspace):
        self.engine, self.topo, self.workspace = engine, topo, workspace
        self.rank = engine.rank
        self.last_seen = {r: time.time() for r in range(topo.n_processes)}
        pids = engine.comm.allgather(os.getpid())
        self.proc = None
        if self.rank == 0:
            roles = [";".join(topo.describe(ep) for ep in topo.endpoints_of_process(r)).replace(" ", "_")
                     for r in range(topo.n_processes)]
            args = ["%d:%s" % (pid, role) for pid, role in zip(pids, roles)]
            self.proc = subprocess.Popen([sys.executable, "-m", "caffepy.dist.watchdog", workspace] + args,
                                         stdin=subprocess.PIPE, start_new_session=True)

    # -- rank 0 -----------------------------------------------------------------------------------
    def health(self, h=None):
        now = time.time()
        if h is not None:
            self.last_seen[self.topo.process_of(h.src)] = now
            return
        for r, seen in self.last_seen.items():
            if r != 0 and now - seen > self.topo.cluster.timeout:
                from .coordinator import DistError
                from .checkpoint import describe_latest
                roles = ", ".join(self.topo.describe(ep) for ep in self.topo.endpoints_of_process(r))
                raise DistError("rank %d (%s) sent no heartbeat for %.0f s; %s"
                                % (r, roles, now - seen, describe_latest(self.workspace)))

    def done(self):
        if self.proc is not None:
            try:
                self.proc.stdin.write(b"done\n")
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.wait(timeout=10)

    def abort(self, message):
        sys.stderr.write("caffepy dist: %s\n" % message)
        sys.stderr.flush()
        self.done()
        self.engine.comm.Abort(1)

    # -- other ranks --------------------------------------------------------------------------------
    def serve(self, proc):
        """Send heartbeats until the local roles are done (STOP) or one fails."""
        ep = self.topo.endpoints_of_process(self.rank)[0]
        coordinator = self.topo.coordinator
        interval = self.topo.cluster.heartbeat_interval
        while any(t.is_alive() for t in proc.threads):
            self.engine.deliver(T.header(T.HEARTBEAT, src=ep, dst=coordinator), [])
            for t in proc.threads:
                t.join(interval / max(1, len(proc.threads)))
        proc.stopping.set()


def _watch(workspace, entries):
    """Wait (pidfds: woken by the first exit) until rank 0 says done or a rank disappears."""
    import select
    done = threading.Event()

    def read_stdin():
        for line in sys.stdin:
            if line.strip() == "done":
                done.set()
                return
    threading.Thread(target=read_stdin, daemon=True).start()
    poller, fds = select.poll(), {}
    for rank, (pid, roles) in enumerate(entries):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            fds[-1 - rank] = rank
            continue
        fds[fd] = rank
        poller.register(fd, select.POLLIN)
    while not done.is_set():
        ready = [fds[fd] for fd, _ in poller.poll(100)] + [r for fd, r in fds.items() if fd < 0]
        if not ready:
            continue
        if done.wait(0.3):
            return 0
        from .checkpoint import describe_latest
        first = sorted(set(ready))
        names = ["rank %d (%s, pid %d)" % (r, entries[r][1].replace("_", " ").replace(";", ", "),
                                           entries[r][0]) for r in first]
        sys.stderr.write("caffepy dist: %s died; the job stops; %s; continue with caffepy train "
                         "--resume\n" % (" and ".join(names), describe_latest(workspace)))
        sys.stderr.flush()
        return 1
    return 0


def main(argv):
    workspace = argv[0]
    entries = []
    for a in argv[1:]:
        pid, roles = a.split(":", 1)
        entries.append((int(pid), roles))
    return _watch(workspace, entries)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
