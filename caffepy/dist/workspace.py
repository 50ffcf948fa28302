"""Checks on the workspace before a distributed run starts (every rank takes part, so all stop
together with the same one-line error).

- **No silent overwrite**: a workspace that holds checkpoint manifests is refused unless the run
  resumes (``--resume``) or says ``--overwrite``; with ``--overwrite`` rank 0 removes the old
  checkpoint files (manifests first) before training.
- **One workspace for all**: checkpoints are written by each rank and verified by rank 0, so every
  rank must see the same directory. Each rank writes ``<workspace>/.caffepy-ranks/<token>-rank<N>``
  (``token`` from rank 0, ``N`` and the host name inside); rank 0 reads them all after a barrier.
  A rank whose file rank 0 cannot see stops the job naming the rank and its host.
"""
import glob
import os
import socket
import uuid

import numpy as np

from ..errors import CaffeError
from ..log import info
from . import checkpoint

_HOST_BYTES = 256


def existing_checkpoints(workspace):
    return checkpoint.manifests(workspace)


def _refusal(workspace, resume, overwrite):
    if resume and overwrite:
        return "--resume and --overwrite: give one, not both"
    found = existing_checkpoints(workspace)
    if found and not resume and not overwrite:
        return ("%s holds checkpoints (latest: step %d); pass --resume to continue from it or "
                "--overwrite to start again from step 0 and replace them"
                % (checkpoint.checkpoint_dir(workspace), found[0][0]))
    return ""


def _clear(workspace):
    d = checkpoint.checkpoint_dir(workspace)
    for _, path in existing_checkpoints(workspace):
        os.remove(path)
    for path in glob.glob(os.path.join(d, "step*-*.bin")):
        os.remove(path)
    info("workspace.py", "--overwrite: removed the checkpoints in %s" % d)


def _bcast_text(comm, text, rank):
    """``text`` of rank 0 to every rank (raw bytes over MPI, no pickle)."""
    data = np.frombuffer(text.encode("utf-8"), np.uint8) if rank == 0 else None
    n = np.array([0 if data is None else data.size], np.int64)
    comm.Bcast(n, root=0)
    buf = data.copy() if rank == 0 else np.empty(int(n[0]), np.uint8)
    comm.Bcast(buf, root=0)
    return buf.tobytes().decode("utf-8")


def _visibility(workspace, comm, rank, size):
    """('' when rank 0 sees every rank's token file, else the error line; the ranks' host names,
    on rank 0)."""
    token = _bcast_text(comm, uuid.uuid4().hex if rank == 0 else "", rank)
    d = os.path.join(workspace, ".caffepy-ranks")
    host = socket.gethostname()
    hosts = np.zeros((size, _HOST_BYTES), np.uint8)
    mine = np.zeros(_HOST_BYTES, np.uint8)
    raw = host.encode("utf-8")[:_HOST_BYTES]
    mine[:len(raw)] = np.frombuffer(raw, np.uint8)
    err = ""
    try:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%s-rank%d" % (token, rank)), "w") as f:
            f.write("%d %s\n" % (rank, host))
    except OSError as e:
        err = "rank %d (host %s) cannot write to workspace %s: %s" % (rank, host, workspace, e.strerror or e)
    comm.Gather(mine, hosts, root=0)
    comm.Barrier()
    errs = np.zeros(1, np.int64)
    if err:
        errs[0] = 1
    total = np.zeros(1, np.int64)
    comm.Allreduce(errs, total)
    names = [bytes(h).rstrip(b"\0").decode("utf-8", "replace") for h in hosts]
    if total[0]:
        return err or "a rank cannot write to workspace %s" % workspace, names
    if rank == 0:
        missing = [r for r in range(size) if not os.path.exists(os.path.join(d, "%s-rank%d" % (token, r)))]
        for r in range(size):
            try:
                os.remove(os.path.join(d, "%s-rank%d" % (token, r)))
            except OSError:
                pass
        if missing:
            err = ("workspace %s is not shared: rank 0 (host %s) cannot see what %s wrote there; put "
                   "the workspace on a filesystem every host mounts at the same path"
                   % (workspace, names[0], ", ".join("rank %d (host %s)" % (r, names[r]) for r in missing)))
    return _bcast_text(comm, err, rank), names


def preflight(workspace, resume, overwrite, comm=None):
    """Run the checks on every rank (``comm``: the MPI communicator, None in process); raises the
    same CaffeError everywhere when one fails; removes old checkpoints on ``overwrite``. Returns
    the host name of every rank (complete on rank 0)."""
    rank = comm.Get_rank() if comm is not None else 0
    why = _refusal(workspace, resume, overwrite) if rank == 0 else ""
    if comm is not None:
        why = _bcast_text(comm, why, rank)
    if why:
        raise CaffeError(why)
    hosts = [socket.gethostname()]
    if comm is not None and comm.Get_size() > 1:
        why, hosts = _visibility(workspace, comm, rank, comm.Get_size())
        if why:
            raise CaffeError(why)
    if overwrite and not resume and rank == 0 and existing_checkpoints(workspace):
        _clear(workspace)
    if comm is not None:
        comm.Barrier()
    return hosts
