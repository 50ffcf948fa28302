"""A workspace shared over NFS between emulated hosts (tools/cluster.py), for the tests.

One host exports a directory with the kernel's NFS server (Debian's nfs-kernel-server:
``rpc.nfsd``, ``rpc.mountd``, ``exportfs``; NFSv4 over TCP only, so no rpcbind), and every other
host mounts it at the same path (``mount -t nfs4``, nfs-common), over its own view of that path:
each emulated host has its own mount namespace, so until the mount a host sees the machine's
directory, and after it the server's. The server runs in the exporting host's network namespace
(nfsd is per network namespace) and stops with it.

:func:`unavailable_reason` says in one line why this cannot run here (a kernel without the nfsd
or nfs4 file system, which is what containers and many VMs have, or the programs missing);
:func:`share` sets it up and returns a function that takes it down.
"""
import os
import shutil
import subprocess

PROGRAMS = ("exportfs", "rpc.nfsd", "rpc.mountd", "mount.nfs4")


def _filesystems():
    try:
        with open("/proc/filesystems") as f:
            return {line.split()[-1] for line in f if line.strip()}
    except OSError:
        return set()


def unavailable_reason():
    """None when the kernel and the programs allow an NFS share here, else why not (one line)."""
    if shutil.which("modprobe"):
        for module in ("nfsd", "nfsv4"):          # loadable modules appear once loaded
            subprocess.run(["modprobe", module], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
    fs = _filesystems()
    missing = [name for name in ("nfsd", "nfs4") if name not in fs]
    if missing:
        return ("NFS: this kernel (%s) has no %s file system (not in /proc/filesystems): the NFS "
                "workspace test cannot run here" % (os.uname().release, " or ".join(missing)))
    absent = [p for p in PROGRAMS if not shutil.which(p) and not os.path.exists("/sbin/" + p)]
    if absent:
        return "NFS: %s not installed (Debian: nfs-kernel-server, nfs-common)" % ", ".join(absent)
    return None


def _check(p, what):
    if p.returncode != 0:
        raise RuntimeError("NFS %s failed (%d): %s" % (what, p.returncode,
                                                       (p.err or p.out or "").strip()[-500:]))


def share(box, path, server="h1", timeout=30):
    """Export ``path`` (a directory) from ``server`` and mount it at ``path`` on every other host of
    ``box``; returns ``stop()``, which unmounts and stops the server (call it before box.close)."""
    path = os.path.abspath(path)
    clients = [h for h in box.hosts if h != server]
    subnet = box.address(server).rsplit(".", 1)[0] + ".0/24"
    steps = [
        (server, ["sh", "-c", "mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd"],
         "nfsd file system"),
        (server, ["exportfs", "-o", "rw,sync,no_root_squash,no_subtree_check,fsid=0,insecure",
                  "%s:%s" % (subnet, path)], "export"),
        (server, ["rpc.mountd", "--no-nfs-version", "2", "--no-nfs-version", "3"], "mountd"),
        (server, ["rpc.nfsd", "--no-nfs-version", "3", "--nfs-version", "4", "--no-udp", "4"],
         "nfsd"),
    ]
    done = []

    def stop():
        for h in reversed(done):
            if h != server:
                box.run(h, ["umount", "-l", path], timeout=timeout)
        if server in done:
            box.run(server, ["rpc.nfsd", "0"], timeout=timeout)
            box.run(server, ["exportfs", "-u", "%s:%s" % (subnet, path)], timeout=timeout)
            box.run(server, ["pkill", "-x", "rpc.mountd"], timeout=timeout)
    try:
        for host, cmd, what in steps:
            _check(box.run(host, cmd, timeout=timeout), what)
            if host not in done:
                done.append(host)
        for h in clients:
            _check(box.run(h, ["mount", "-t", "nfs4", "-o",
                               "proto=tcp,port=2049,hard,timeo=50,retrans=3,actimeo=0",
                               "%s:/" % box.address(server), path], timeout=timeout),
                   "mount on %s" % h)
            done.append(h)
    except BaseException:
        stop()
        raise
    return stop
