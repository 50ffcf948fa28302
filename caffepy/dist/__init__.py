"""Distributed training on parameter servers (worker groups, stubs, server groups).

``train(solver, cluster=None, cluster_file=None, resume=False, feeder=None, engine=None)`` (see
:mod:`.trainer`) is what ``caffepy train --cluster C`` / ``--resume`` and a solver file with a
``cluster { ... }`` block run; ``train_multi_gpu(solver, gpus)`` serves ``--gpu 0,1``.
Modules: topology, transport (+ inproc, mpi engines), worker, stub, server, consistency,
checkpoint, coordinator, watchdog, waitfree, routing (+ sfb, sparse). Nothing here imports mpi4py unless the mpi engine is used.
"""
from .checkpoint import init_net, latest_complete
from .coordinator import DistError
from .trainer import Result, train, train_multi_gpu

train_distributed = train

__all__ = ["train", "train_distributed", "train_multi_gpu", "init_net", "latest_complete",
           "DistError", "Result"]
