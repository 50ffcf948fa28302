"""How tools/cluster.py starts commands inside its emulated hosts: Hydra's ssh launcher and its broker.

Hydra's ssh launcher calls ``<launcher> -x HOST CMD...``. A process in one host's PID namespace
cannot enter a sibling's, so the launcher script (``LAUNCHER``) hands HOST, CMD and its
stdin/stdout/stderr (as SCM_RIGHTS file descriptors) over a unix socket to a ``Broker`` thread of
the harness, which ``nsenter``s HOST's mount/UTS/network/PID namespaces, runs ``sh -c CMD`` there
with those descriptors, sends back the exit status, and kills CMD when the launcher goes away (as
sshd does when ssh dies).
"""
import os
import signal
import subprocess

LAUNCHER = """#!%(python)s
# Hydra's ssh launcher for the emulated hosts: launch -x HOST CMD...  (asks the harness's broker,
# which lives outside every host's PID namespace, to start CMD there with our stdin/out/err)
import array, json, os, socket, struct, sys
args = sys.argv[1:]
if args and args[0] == "-x":
    args = args[1:]
s = socket.socket(socket.AF_UNIX)
s.connect("%(socket)s")
msg = json.dumps({"host": args[0], "cmd": " ".join(args[1:]), "cwd": os.getcwd(),
                  "env": dict(os.environ)}).encode()
s.sendmsg([struct.pack("!I", len(msg)) + msg],
          [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
rc = s.recv(4)
sys.exit(struct.unpack("!i", rc)[0] if len(rc) == 4 else 255)
"""


class Broker(object):
    """What sshd is to ssh: starts a launcher's command inside the named host's namespaces with the
    launcher's stdio, answers its exit status, kills it when the launcher goes away."""

    def __init__(self, cluster, path):
        import socket
        import threading
        self.cluster, self.path = cluster, path
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(64)
        self.closed = False
        threading.Thread(target=self._accept, name="cluster-broker", daemon=True).start()

    def _accept(self):
        import threading
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        import array
        import json
        import select
        import socket
        import struct
        fds = array.array("i")
        try:
            data, anc, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
            n = struct.unpack("!I", data[:4])[0]
            while len(data) < 4 + n:
                more = conn.recv(4 + n - len(data))
                if not more:
                    raise OSError("launcher went away")
                data += more
            req = json.loads(data[4:4 + n].decode())
            pid = self.cluster.pids[req["host"]]
            argv = ["nsenter", "-t", str(pid), "-m", "-u", "-n", "-p", "--wd=%s" % req["cwd"],
                    "--", "sh", "-c", req["cmd"]]
            p = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], env=req["env"],
                                 start_new_session=True)
        except (OSError, ValueError, KeyError, IndexError):
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        self.cluster.procs.append(p)
        while p.poll() is None and not self.closed:
            ready, _, _ = select.select([conn], [], [], 0.2)
            if ready and not conn.recv(1):      # the launcher died: end its command (ssh does)
                if self.cluster.hangup:
                    kill_tree(p)
                break
        try:
            conn.sendall(struct.pack("!i", p.returncode if p.returncode is not None else 255))
        except OSError:
            pass
        conn.close()

    def close(self):
        self.closed = True
        self.sock.close()


def kill_tree(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            p.kill()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
