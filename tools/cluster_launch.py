"""How tools/cluster.py starts commands inside its emulated hosts: Hydra's ssh launcher and its broker.

Hydra's ssh launcher calls ``<launcher> -x HOST CMD...``. A process in one host's PID namespace
cannot enter a sibling's, so the launcher script (``LAUNCHER``) hands HOST, CMD and its
stdin/stdout/stderr (as SCM_RIGHTS file descriptors) over a unix socket to a ``Broker`` thread of
the harness, which ``nsenter``s HOST's mount/UTS/network/PID namespaces, runs ``sh -c CMD`` there
with those descriptors, sends back the exit status, and kills CMD when the launcher goes away (as
sshd does when ssh dies).

Who may ask: the socket lives in a directory only its owner can enter (mode 0700, checked) and is
itself 0600; the broker also checks the caller's uid (``SO_PEERCRED``) is its own. A request is
read within ``REQUEST_TIMEOUT`` s, is at most ``REQUEST_MAX`` bytes, names a host of this cluster,
carries exactly three descriptors and string fields; anything else is refused (one line on stderr
per kind of refusal) and never ends the broker.
"""
import os
import signal
import stat
import struct
import subprocess
import sys

REQUEST_MAX = 1 << 20       # bytes of one launcher's request
REQUEST_TIMEOUT = 10.0      # s to send it

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
        st = os.stat(os.path.dirname(os.path.abspath(path)))
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise RuntimeError("broker: %s must be a directory only its owner can enter (0700)"
                               % os.path.dirname(path))
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        os.chmod(path, 0o600)
        self.sock.listen(64)
        self.closed = False
        self.refused = set()
        threading.Thread(target=self._accept, name="cluster-broker", daemon=True).start()

    def _accept(self):
        import threading
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _refuse(self, conn, why):
        if why not in self.refused:
            self.refused.add(why)
            sys.stderr.write("cluster broker: refused a launch request: %s (logged once)\n" % why)
        conn.close()

    def _request(self, conn, fds):
        """The launcher's request (a dict of checked fields) and its 3 descriptors; ValueError."""
        import json
        import socket
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            raise ValueError("the caller is another user")
        conn.settimeout(REQUEST_TIMEOUT)
        data, anc, _, _ = conn.recvmsg(REQUEST_MAX + 4, socket.CMSG_LEN(3 * fds.itemsize))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        if len(fds) != 3:
            raise ValueError("%d descriptors (3 expected)" % len(fds))
        if len(data) < 4:
            raise ValueError("no length prefix")
        n = struct.unpack("!I", data[:4])[0]
        if n > REQUEST_MAX:
            raise ValueError("%d bytes (at most %d)" % (n, REQUEST_MAX))
        while len(data) < 4 + n:
            more = conn.recv(4 + n - len(data))
            if not more:
                raise ValueError("the launcher went away")
            data += more
        req = json.loads(data[4:4 + n].decode())
        if not isinstance(req, dict) or req.get("host") not in self.cluster.pids or \
                req.get("host") == "switch":
            raise ValueError("no host of this cluster named")
        env = req.get("env")
        if not (isinstance(req.get("cmd"), str) and isinstance(req.get("cwd"), str)
                and isinstance(env, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise ValueError("malformed fields")
        return req

    def _serve(self, conn):
        import array
        import select
        fds = array.array("i")
        try:
            req = self._request(conn, fds)
            pid = self.cluster.pids[req["host"]]
            argv = ["nsenter", "-t", str(pid), "-m", "-u", "-n", "-p", "--wd=%s" % req["cwd"],
                    "--", "sh", "-c", req["cmd"]]
            p = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], env=req["env"],
                                 start_new_session=True)
        except (OSError, ValueError, KeyError, IndexError, UnicodeError) as e:
            self._refuse(conn, "%s" % (e if isinstance(e, ValueError) else type(e).__name__))
            return
        except Exception as e:       # whatever one request does, the broker goes on
            self._refuse(conn, "%s: %s" % (type(e).__name__, e))
            return
        finally:
            for fd in fds:
                os.close(fd)
        conn.settimeout(None)
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
