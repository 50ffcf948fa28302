"""A cluster in one box: N emulated hosts, each its own network + UTS + PID + mount namespace.

::

    with Cluster(2, rate="1gbit") as c:          # hosts h1, h2 at 10.213.<k>.1, .2 on one bridge
        c.run("h2", ["hostname"])                 # -> "h2"
        p = c.mpiexec(["python3", "script.py"], hosts=["h1", "h2"], ppn=2)   # rank 0,1 on h1 ...
        c.kill_host("h2")                         # kill -9 every process of that host

Layout (nothing is created outside namespaces this module made):

- a *switch* namespace (network only) holding a bridge ``br0``;
- per host ``hI`` a holder process (``unshare --net --uts --pid --mount --fork --mount-proc``): PID
  1 of its PID namespace, hostname ``hI``, its own ``/etc/hosts`` (bind-mounted, private mount
  propagation) naming every host and its own ``/dev/shm`` (a fresh tmpfs, gone with the host: MPI's
  shared-memory segments are named by host, job and local rank, and Slurm's job ids restart at 1 in
  every box, so a shared ``/dev/shm`` hands a killed host's stale segment to the next box's job);
  its interface ``eth0`` is one end of a veth pair whose other end is a port of ``br0``. Both ends
  carry a ``tc tbf`` qdisc at ``rate`` (no netem: no delay);
- addresses from one private /24 that lives only on that bridge (no route leaves it);
- ``launcher``: the executable Hydra's ssh launcher calls as ``<launcher> -x HOST CMD...``. A
  process in one host's PID namespace cannot enter a sibling's, so (as ssh asks sshd) it hands
  HOST, CMD and its stdin/stdout/stderr over a unix socket to a broker thread of this harness,
  which runs ``nsenter`` into HOST's namespaces and ``sh -c CMD`` there, returns the exit status
  and kills CMD if the launcher goes away (tools/cluster_launch.py).

Teardown (``close``, also at exit and on failure): every holder is killed, which kills every
process of its PID namespace and frees its network namespace with its veth; nothing is left on
disk but the temporary directory, which is removed. Holders get SIGKILL if this process dies.

MPI across the hosts: the mpich wheel's UCX must use TCP on ``eth0`` (``UCX_TLS=tcp``,
``UCX_NET_DEVICES=eth0``); without it ``MPI_Init`` hangs in the address exchange. :meth:`env`
returns an environment with those set. :meth:`mpiexec` starts MPICH's Hydra through the ssh
launcher; :meth:`mpirun` starts Open MPI's ``mpirun`` (Debian's ``mpirun.openmpi``) through its rsh
launcher (``plm_rsh_agent``: the same launcher), with TCP on ``eth0`` for both its out-of-band
channel and MPI's messages; its ranks load mpi4py's Open MPI extension (``MPI4PY_LIBMPI``, see
:data:`OPENMPI_ENV`). ``tools/slurm_box.py`` runs Slurm on the hosts.

``python3 tools/cluster.py [N] [RATE] -- CMD...`` runs CMD in h1 of a fresh cluster (e.g. an
mpiexec line using ``$CAFFEPY_CLUSTER_LAUNCHER``) and tears it down afterwards.
"""
import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:     # loaded by path (tests, benchmarks)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_launch import LAUNCHER, Broker, kill_tree  # noqa: E402

SUBNET = "10.213.%d"
SHM_SIZE = "1g"            # each host's /dev/shm (tmpfs: pages are taken as written)
UCX_ENV = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "eth0"}
# Open MPI: mpi4py's wheels (>= 4.1) carry an extension for Open MPI's ABI, loaded when mpi4py
# opens Open MPI's library; Debian's is libmpi.so.40 (the pyenv / venv lib directory, searched
# first, may hold the mpich wheel's libmpi.so)
OPENMPI_ENV = {"MPI4PY_LIBMPI": "libmpi.so.40"}
OPENMPI_MPIRUN = "mpirun.openmpi"
_LIVE = []


class ClusterUnavailable(RuntimeError):
    """Namespaces, veth, bridges or tc cannot be used here (the reason is the message)."""


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)    # PR_SET_PDEATHSIG
    os.setsid()


def _child_pid(pid, deadline):
    """The forked child of ``unshare --fork`` (PID 1 of the new namespace), seen from here."""
    path = "/proc/%d/task/%d/children" % (pid, pid)
    while time.time() < deadline:
        try:
            with open(path) as f:
                kids = f.read().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.01)
    raise ClusterUnavailable("unshare did not start its namespace holder")


def unavailable_reason():
    """None when this box can make emulated hosts, else a one-line reason."""
    for tool in ("unshare", "nsenter", "ip", "tc"):
        if shutil.which(tool) is None:
            return "cluster in a box: '%s' is not installed" % tool
    if os.geteuid() != 0:
        return "cluster in a box: needs root (network namespaces, veth, tc)"
    try:
        with Cluster(1, rate="1gbit") as c:
            c.run("h1", ["true"], timeout=20)
    except (ClusterUnavailable, subprocess.SubprocessError, OSError) as e:
        return "cluster in a box: %s" % str(e).splitlines()[0]
    return None


class Cluster(object):
    """N emulated hosts ``h1..hN`` on one bridge, links capped at ``rate`` (tc syntax: 1gbit)."""

    def __init__(self, n_hosts=2, rate="10gbit", subnet=None, start_timeout=30.0):
        if not 1 <= n_hosts <= 200:
            raise ValueError("n_hosts must be 1..200")
        self.n = n_hosts
        self.rate = rate
        self.hosts = ["h%d" % (i + 1) for i in range(n_hosts)]
        self.subnet = subnet or SUBNET % (1 + os.getpid() % 250)
        self.start_timeout = start_timeout
        self.dir = None
        self.holders = {}      # name -> unshare Popen ("switch" and hosts)
        self.pids = {}         # name -> PID 1 of that namespace, seen from here
        self.procs = []        # Popen of commands run in hosts (killed at close)
        self.launcher = None
        self.broker = None
        self.hangup = True     # the broker ends a command whose launcher went away (as sshd does)

    # -- life cycle -------------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def address(self, host):
        return "%s.%d" % (self.subnet, self.hosts.index(host) + 1)

    def start(self):
        _LIVE.append(self)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        deadline = time.time() + self.start_timeout
        self.dir = tempfile.mkdtemp(prefix="caffepy-cluster-")
        os.chmod(self.dir, 0o700)     # (mkdtemp makes it so): only its owner reaches the broker
        hosts_file = os.path.join(self.dir, "hosts")
        with open(hosts_file, "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n")
            for h in self.hosts:
                f.write("%s %s\n" % (self.address(h), h))
        self._holder("switch", ["--net"], "ip link set lo up && ip link add br0 type bridge && "
                     "ip link set br0 up", deadline)
        for h in self.hosts:
            self._holder(h, ["--net", "--uts", "--pid", "--mount", "--propagation", "private"],
                         "hostname %s && mount --bind %s /etc/hosts && mount -t proc proc /proc && "
                         "mount -t tmpfs -o mode=1777,size=%s tmpfs /dev/shm && "
                         "ip link set lo up" % (h, hosts_file, SHM_SIZE), deadline)
        burst = self._burst()
        for h in self.hosts:
            port = "v" + h
            self._in("switch", "ip link add %s type veth peer name eth0 netns %d && "
                     "ip link set %s master br0 && ip link set %s up && "
                     "tc qdisc add dev %s root tbf rate %s burst %d latency 50ms"
                     % (port, self.pids[h], port, port, port, self.rate, burst), deadline)
            self._in(h, "ip addr add %s/24 dev eth0 && ip link set eth0 up && "
                     "tc qdisc add dev eth0 root tbf rate %s burst %d latency 50ms"
                     % (self.address(h), self.rate, burst), deadline)
        self.broker = Broker(self, os.path.join(self.dir, "launch.sock"))
        self.launcher = os.path.join(self.dir, "launch")
        with open(self.launcher, "w") as f:
            f.write(LAUNCHER % {"python": sys.executable, "socket": self.broker.path})
        os.chmod(self.launcher, 0o755)

    def _burst(self):
        units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
        for u, mult in units.items():
            if self.rate.endswith(u):
                bits = float(self.rate[:-len(u)]) * mult
                return int(max(64 * 1024, bits / 8 * 0.0005))   # 0.5 ms of data (hrtimer-paced)
        raise ValueError("rate must end in kbit, mbit or gbit (got %s)" % self.rate)

    def _holder(self, name, flags, setup, deadline):
        cmd = ["unshare"] + flags + ["--fork", "--kill-child", "--", "sh", "-c",
                                     "%s && echo ok && exec sleep 1000000" % setup]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=_die_with_parent)
        self.holders[name] = p
        line = p.stdout.readline()
        if line.strip() != b"ok":
            p.kill()
            err = p.stderr.read().decode(errors="replace").strip().splitlines()
            raise ClusterUnavailable("%s: %s" % (name, err[-1] if err else "namespace setup failed"))
        self.pids[name] = _child_pid(p.pid, deadline)

    def _in(self, name, script, deadline):
        left = max(1.0, deadline - time.time())
        r = subprocess.run(["nsenter", "-t", str(self.pids[name]), "-n", "--", "sh", "-c", script],
                           capture_output=True, text=True, timeout=left)
        if r.returncode:
            err = r.stderr.strip().splitlines()
            raise ClusterUnavailable("%s: %s" % (name, err[-1] if err else "setup failed"))

    def close(self):
        if self.broker is not None:
            self.broker.close()
            self.broker = None
        for p in self.procs:
            kill_tree(p)
        for name in list(self.holders):
            p = self.holders.pop(name)
            pid = self.pids.get(name)
            if pid is not None:       # PID 1 of the namespace: its death ends every process in it
                try:                  # (unshare, its parent, reaps it and exits)
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
            for stream in (p.stdout, p.stderr):
                stream.close()
        self.pids.clear()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if self in _LIVE:
            _LIVE.remove(self)

    # -- running things -----------------------------------------------------------------------------
    def env(self, **extra):
        """os.environ plus the UCX settings MPI needs across emulated hosts, plus ``extra``."""
        env = dict(os.environ)
        env.update(UCX_ENV)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def popen(self, host, cmd, env=None, cwd=None, **kw):
        """Start ``cmd`` (argv) inside ``host``'s namespaces; killed at close."""
        pid = self.pids[host]
        argv = ["nsenter", "-t", str(pid), "-m", "-u", "-n", "-p", "--wd=%s" % (cwd or os.getcwd()),
                "--"] + list(cmd)
        p = subprocess.Popen(argv, env=env or self.env(), start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def run(self, host, cmd, timeout=60, **kw):
        p = self.popen(host, cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        try:
            p.out, p.err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(p)
            p.out, p.err = p.communicate()
            raise
        return p

    def mpiexec_argv(self, cmd, hosts=None, ppn=1, n=None, auto_cleanup=True):
        hosts = list(hosts or self.hosts)
        n = n or ppn * len(hosts)
        return ["mpiexec"] + ([] if auto_cleanup else ["-disable-auto-cleanup"]) + [
                "-launcher", "ssh", "-launcher-exec", self.launcher,
                "-hosts", ",".join("%s:%d" % (h, ppn) for h in hosts), "-n", str(n)] + list(cmd)

    def mpiexec(self, cmd, hosts=None, ppn=1, n=None, env=None, auto_cleanup=True, **kw):
        """Start ``mpiexec`` in the first host with ranks placed ``ppn`` per host (block)."""
        hosts = list(hosts or self.hosts)
        return self.popen(hosts[0], self.mpiexec_argv(cmd, hosts, ppn, n, auto_cleanup), env=env, **kw)

    def mpirun_argv(self, cmd, hosts=None, ppn=1, n=None, mpirun=None, export=()):
        """Open MPI's ``mpirun`` line: ranks placed ``ppn`` per host, daemons started through the
        launcher, TCP on ``eth0``; ``export``: environment variables forwarded (``-x``)."""
        hosts = list(hosts or self.hosts)
        n = n or ppn * len(hosts)
        argv = [mpirun or os.environ.get("CAFFEPY_OPENMPI_MPIRUN", OPENMPI_MPIRUN),
                "--allow-run-as-root", "--oversubscribe",
                "-H", ",".join("%s:%d" % (h, ppn) for h in hosts), "-np", str(n),
                "--mca", "plm_rsh_agent", self.launcher, "--mca", "pml", "ob1",
                "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "eth0",
                "--mca", "oob_tcp_if_include", "eth0"]
        for name in export:
            argv += ["-x", name]
        return argv + list(cmd)

    def mpirun(self, cmd, hosts=None, ppn=1, n=None, env=None, **kw):
        """Start Open MPI's ``mpirun`` in the first host (ranks ``ppn`` per host, block)."""
        hosts = list(hosts or self.hosts)
        env = dict(env or self.env())
        for k, v in OPENMPI_ENV.items():
            env.setdefault(k, v)
        return self.popen(hosts[0], self.mpirun_argv(cmd, hosts, ppn, n, export=sorted(OPENMPI_ENV)),
                          env=env, **kw)

    def host_pids(self, host):
        """Pids (seen from here) of every live process in ``host``'s PID namespace (zombies left:
        the namespace's PID 1 is a plain ``sleep`` that reaps nobody)."""
        want = os.readlink("/proc/%d/ns/pid" % self.pids[host])
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if os.readlink("/proc/%s/ns/pid" % d) != want:
                        continue
                    with open("/proc/%s/stat" % d) as f:
                        state = f.read().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state != "Z":
                    out.append(int(d))
        return out

    def kill_host(self, host, cut=False):
        """kill -9 every process of ``host`` (a machine that dies); the host stays down. ``cut``:
        first take its link down, so its peers get no FIN or RST (a power cut, not a crash), and
        stop the broker from ending the commands that host's launchers started (sshd would not
        notice either)."""
        if cut:
            self.hangup = False
            self._in("switch", "ip link set v%s down" % host, time.time() + 10)
        os.kill(self.pids[host], signal.SIGKILL)


@atexit.register
def _close_all():
    for c in list(_LIVE):
        c.close()


def main(argv):
    n, rate = 2, "10gbit"
    if "--" in argv:
        i = argv.index("--")
        head, cmd = argv[:i], argv[i + 1:]
    else:
        head, cmd = argv, ["sh", "-c", "hostname; ip -brief addr show eth0"]
    if head:
        n = int(head[0])
    if len(head) > 1:
        rate = head[1]
    with Cluster(n, rate) as c:
        env = c.env(CAFFEPY_CLUSTER_LAUNCHER=c.launcher, CAFFEPY_CLUSTER_HOSTS=",".join(c.hosts))
        p = c.popen(c.hosts[0], cmd, env=env)
        try:
            return p.wait()
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
