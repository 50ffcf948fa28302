"""Slurm in the cluster in a box: slurmctld on h1, slurmd on every emulated host of a
tools/cluster.py ``Cluster``, authenticated by munge.

::

    with Cluster(2) as c, SlurmBox(c) as s:
        s.run(["srun", "-N", "2", "--ntasks-per-node=2", "--mpi=pmix", "hostname"])
        job = s.sbatch(script_path, cwd=d)             # -> job id
        s.wait_job(job, timeout=120)                    # -> {"JobState": "COMPLETED", ...}
        c.kill_host("h2")                               # the node dies: slurmd, steps, tasks

Layout, all under ``<cluster dir>/slurm`` (removed with the cluster):

- ``munge/``: a key made by ``mungekey`` for this box, and one ``munged`` (run in h1, so it dies
  with h1's PID namespace) whose socket every host reaches through the shared file system;
  slurm.conf names it (``AuthInfo=socket=...``). munged wants its socket's directory open to all
  (0755) and every directory above it too; the box's directory is 0700 (only its owner reaches the
  launch broker), so munged runs with ``--force`` and logs a warning about it;
- ``slurm.conf``: ``SlurmUser=root``, ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``,
  ``SelectType=select/linear``, no accounting, ``MpiDefault=none``; one ``NodeName`` per host at its
  address with ``CPUs=cpus`` (``SlurmdParameters=config_overrides``, so a 2-core machine can host
  nodes of 4); spool, state, pid and log files per host (``%n``), and ``TmpFS=<dir>/%n/tmp``, so the
  PMIx plugin's per-step directories of two hosts do not collide in the one /tmp they share;
- the daemons run in the foreground (``-D``) inside their host's namespaces, started with
  ``Cluster.popen`` (so ``Cluster.close`` kills them, and every step daemon and task with their
  host's PID namespace); their output goes to ``<host>-<daemon>.out`` files. A node whose slurmd
  was lost comes back when slurmd starts again (``ReturnToService=2``; ``SlurmdTimeout`` is
  ``slurmd_timeout``, 10 s).

MPI under srun: ``--mpi=pmix`` with Open MPI (mpi4py's Open MPI extension, ``MPI4PY_LIBMPI``);
the mpich wheel speaks PMI-1 only, which Slurm's pmi2 plugin takes in reads of at most 1024
bytes, so with it start ``mpiexec`` inside the allocation (Hydra launches through srun).

``SlurmUnavailable`` (from ``start``) and :func:`unavailable_reason` say in one line what is
missing. Every wait is bounded in time.
"""
import os
import shutil
import subprocess
import time

TOOLS = ("slurmctld", "slurmd", "srun", "sbatch", "scontrol", "sinfo", "munged", "mungekey")

CONF = """\
ClusterName=box
SlurmctldHost=%(first)s(%(first_addr)s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%(dir)s/munge/munge.socket
StateSaveLocation=%(dir)s/ctld
SlurmctldPidFile=%(dir)s/ctld/slurmctld.pid
SlurmctldLogFile=%(dir)s/ctld/slurmctld.log
SlurmdSpoolDir=%(dir)s/%%n/spool
SlurmdPidFile=%(dir)s/%%n/slurmd.pid
SlurmdLogFile=%(dir)s/%%n/slurmd.log
TmpFS=%(dir)s/%%n/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=%(slurmd_timeout)d
KillWait=2
MailProg=/bin/true
"""


class SlurmUnavailable(RuntimeError):
    """Slurm or munge is not installed or will not start here (the reason is the message)."""


def unavailable_reason():
    """None when the Slurm and munge programs are installed, else a one-line reason."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return "slurm in a box: %s not installed (apt-get install slurmd slurmctld slurm-client " \
               "munge)" % ", ".join(missing)
    return None


class SlurmBox(object):
    """slurmctld on the cluster's first host, slurmd on each; ``cpus`` per node."""

    def __init__(self, cluster, cpus=4, ready_timeout=30.0, slurmd_timeout=10):
        self.c = cluster
        self.cpus = cpus
        self.ready_timeout = ready_timeout
        self.slurmd_timeout = slurmd_timeout
        self.dir = self.conf = None
        self.daemons = {}          # (host, name) -> Popen

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self):
        reason = unavailable_reason()
        if reason:
            raise SlurmUnavailable(reason)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        c = self.c
        self.dir = os.path.join(c.dir, "slurm")
        for sub in ["ctld"] + ["%s/%s" % (h, d) for h in c.hosts for d in ("spool", "tmp")]:
            os.makedirs(os.path.join(self.dir, sub))
        munge = os.path.join(self.dir, "munge")
        os.makedirs(munge)
        os.chmod(munge, 0o755)
        key = os.path.join(munge, "munge.key")
        r = subprocess.run(["mungekey", "-c", "-k", key], capture_output=True, text=True, timeout=30)
        if r.returncode:
            raise SlurmUnavailable("mungekey: %s" % (r.stderr.strip() or r.returncode))
        self.conf = os.path.join(self.dir, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(CONF % dict(dir=self.dir, first=c.hosts[0], first_addr=c.address(c.hosts[0]),
                                slurmd_timeout=self.slurmd_timeout))
            for h in c.hosts:
                f.write("NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n" % (h, c.address(h), self.cpus))
            f.write("PartitionName=box Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n")
        self._daemon(c.hosts[0], "munged", ["munged", "-F", "--force", "--key-file=" + key,
                                            "--socket=%s/munge.socket" % munge,
                                            "--pid-file=%s/munged.pid" % munge,
                                            "--log-file=%s/munged.log" % munge,
                                            "--seed-file=%s/munged.seed" % munge])
        self._wait(lambda: os.path.exists(os.path.join(munge, "munge.socket")), "munged's socket")
        self._daemon(c.hosts[0], "slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        for h in c.hosts:
            self.start_slurmd(h)
        self.wait_idle()

    def _daemon(self, host, name, argv):
        out = open(os.path.join(self.dir, "%s-%s.out" % (host, name)), "ab")
        try:
            self.daemons[(host, name)] = self.c.popen(host, argv, env=self.env(), stdout=out,
                                                      stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL)
        finally:
            out.close()

    def start_slurmd(self, host):
        """(Re)start ``host``'s slurmd."""
        self._daemon(host, "slurmd", ["slurmd", "-D", "-f", self.conf])

    def _wait(self, ready, what, timeout=None):
        deadline = time.time() + (timeout or self.ready_timeout)
        while time.time() < deadline:
            for (host, name), p in self.daemons.items():
                if p.poll() is not None:
                    raise SlurmUnavailable("%s on %s exited (status %s): %s" % (
                        name, host, p.returncode, self._tail(host, name)))
            if ready():
                return
            time.sleep(0.2)
        raise SlurmUnavailable("no %s in %.0f s" % (what, timeout or self.ready_timeout))

    def _tail(self, host, name):
        try:
            with open(os.path.join(self.dir, "%s-%s.out" % (host, name))) as f:
                lines = [l.strip() for l in f if l.strip()]
        except OSError:
            return "no output"
        return lines[-1] if lines else "no output"

    def node_states(self):
        """{node: state} as sinfo reports them ({} when slurmctld does not answer)."""
        try:
            r = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
        except subprocess.TimeoutExpired:
            return {}
        return dict(line.split() for line in r.out.splitlines() if len(line.split()) == 2)

    def wait_idle(self, timeout=None):
        """Wait until every node is idle (bounded; SlurmUnavailable on timeout)."""
        self._wait(lambda: set(self.node_states().values()) == {"idle"}
                   and len(self.node_states()) == len(self.c.hosts), "idle nodes", timeout)

    def close(self):
        for p in self.daemons.values():
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.daemons.clear()

    # -- using it -----------------------------------------------------------------------------------
    def env(self, **extra):
        """The cluster's environment plus ``SLURM_CONF`` and ``extra``."""
        return self.c.env(SLURM_CONF=self.conf, **extra)

    def run(self, argv, host=None, timeout=60, env=None, **kw):
        """Run a Slurm command (argv) on ``host`` (the first one); the finished Popen (.out, .err)."""
        return self.c.run(host or self.c.hosts[0], argv, timeout=timeout, env=env or self.env(), **kw)

    def popen(self, argv, host=None, env=None, **kw):
        return self.c.popen(host or self.c.hosts[0], argv, env=env or self.env(), **kw)

    def sbatch(self, script, cwd, env=None, args=()):
        """Submit ``script`` (with ``args``) from ``cwd`` on the first host; the job id."""
        r = self.run(["sbatch", "--parsable", script] + list(args), cwd=cwd, env=env, timeout=30)
        if r.returncode:
            raise RuntimeError("sbatch: %s" % r.err.strip())
        return r.out.strip().split(";")[0]

    def job(self, job_id):
        """``scontrol show job`` as a dict ({} once the job is forgotten)."""
        r = self.run(["scontrol", "-o", "show", "job", str(job_id)], timeout=10)
        return dict(kv.split("=", 1) for kv in r.out.split() if "=" in kv)

    def wait_job(self, job_id, timeout=120, states=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                                      "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY")):
        """Wait (bounded) until the job is in one of ``states``; its ``scontrol`` fields."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            info = self.job(job_id)
            if info.get("JobState") in states:
                return info
            time.sleep(0.25)
        raise TimeoutError("job %s not finished in %.0f s: %s" % (job_id, timeout, self.job(job_id)))
