"""Which rank of an MPI job this process is, from the launcher's environment (no MPI import).

Used before any communicator exists: ``--log L`` becomes ``L.rank<N>`` on rank N of a multi-rank
job (:func:`rank_log_path`), and only rank 0 prints the solver parameters (:func:`is_lead_rank`).
MPICH/Hydra (``PMI_RANK`` / ``PMI_SIZE``), Open MPI (``OMPI_COMM_WORLD_*``), Slurm with PMIx
(``PMIX_RANK`` / ``SLURM_STEP_NUM_TASKS``).
"""
import os

_RANK_VARS = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMIX_RANK", "SLURM_STEP_NUM_TASKS"))


def launcher_rank():
    """(rank, size) from the MPI launcher's environment; (0, 1) outside mpiexec / srun."""
    for rank_var, size_var in _RANK_VARS:
        try:
            size = int(os.environ.get(size_var, "1"))
            if rank_var in os.environ and size > 1:
                return int(os.environ[rank_var]), size
        except ValueError:
            continue
    return 0, 1


def is_lead_rank():
    return launcher_rank()[0] == 0


def rank_log_path(path):
    """``path.rank<N>`` when started as one of several MPI ranks, else ``path``."""
    rank, size = launcher_rank()
    return "%s.rank%d" % (path, rank) if path and size > 1 else path
