"""The MPI engine (mpi4py): one process per rank; ranks take their roles from the topology.

A message to an endpoint of another rank is the serialized DistHeader (tag 1) followed by each
buffer sent straight from its numpy memory (tag 2, zero copy); a send lock keeps the parts of one
message together. One receiver thread per process polls (``Iprobe`` with a short sleep, so idle
ranks do not spin on a shared machine), receives each buffer into a fresh numpy array and puts the
message in the destination endpoint's inbox. Messages between endpoints of the same rank never
touch MPI. mpi4py is imported here only.
"""
import os
import threading
import time

import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2
from .transport import Engine

TAG_HEADER, TAG_DATA = 1, 2


def mpi_world():
    """(comm, rank, size) of MPI_COMM_WORLD; a one-line error without mpi4py."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise CaffeError("the mpi engine needs mpi4py (pip install mpi4py mpich)")
    comm = MPI.COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()


class MpiEngine(Engine):
    name = "mpi"

    def __init__(self, topology, comm=None):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = comm or MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        if self.comm.Get_size() != topology.n_processes:
            raise CaffeError("the cluster needs %d MPI processes (%d workers%s), mpiexec started %d"
                             % (topology.n_processes, topology.W,
                                " + %d servers" % topology.S if topology.cluster.server_worker_separate
                                else "", self.comm.Get_size()))
        super(MpiEngine, self).__init__(topology, topology.endpoints_of_process(self.rank))
        self.send_lock = threading.Lock()
        self._closed = threading.Event()
        self.receiver = threading.Thread(target=self._receive_loop, name="mpi-receiver", daemon=True)
        self.receiver.start()

    def host_compute_threads(self, local_workers):
        """Ranks on this host, as the launcher reports them (MPICH/Hydra, Open MPI, Slurm), each
        counted as ``local_workers`` nets; without a report, this rank's workers alone."""
        for var in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE"):
            try:
                return int(os.environ[var].split("(")[0].split(",")[0]) * max(1, local_workers)
            except (KeyError, ValueError):
                continue
        return local_workers

    def deliver(self, h, buffers):
        if h.dst in self.inboxes:
            self.inboxes[h.dst].put((h, buffers))
            return
        rank = self.topology.process_of(h.dst)
        data = np.frombuffer(h.SerializeToString(), dtype=np.uint8)
        with self.send_lock:
            self.comm.Send([data, self.MPI.BYTE], dest=rank, tag=TAG_HEADER)
            for b in buffers:
                self.comm.Send([b.view(np.uint8), self.MPI.BYTE], dest=rank, tag=TAG_DATA)

    def _receive_loop(self):
        MPI, comm = self.MPI, self.comm
        status = MPI.Status()
        idle = 0
        while not self._closed.is_set():
            if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_HEADER, status=status):
                idle = min(idle + 1, 20)
                time.sleep(0.00005 * idle)
                continue
            idle = 0
            source, n = status.Get_source(), status.Get_count(MPI.BYTE)
            raw = bytearray(n)
            comm.Recv([raw, MPI.BYTE], source=source, tag=TAG_HEADER)
            h = caffe_pb2.DistHeader()
            h.ParseFromString(bytes(raw))
            buffers = []
            for dt, size in zip(h.dtype, h.size):
                arr = np.empty(int(size), dtype=np.dtype(dt))
                comm.Recv([arr.view(np.uint8), MPI.BYTE], source=source, tag=TAG_DATA)
                buffers.append(arr)
            inbox = self.inboxes.get(h.dst)
            if inbox is not None:
                inbox.put((h, buffers))

    def close(self):
        self._closed.set()
        self.receiver.join(timeout=5)
