"""A performance model of the distributed solver: steps/s of a net on N hosts (``caffepy plan``).
This module parses link rates and gives :func:`predict`; the simulation of the steps described
below is :class:`~caffepy.dist.plan_model.Model`.

**What is predicted.** The steady-state step time ``T`` of a :mod:`caffepy.dist.trainer` run, its
samples/s ``G B / T`` (G worker groups of batch B, K workers each at m = B / K) and its
efficiency ``E = samples/s / (G K m / T_1(m))``, T_1 the single-process solver's step: with one
worker per host, against as many hosts each training alone.

**The step, message by message.** One step of every worker is simulated as caffepy runs it, from
the routes of :func:`caffepy.dist.routing.make_plan` (the trainer's own decision, with its
:class:`~caffepy.dist.sfb.CostModel`) and the slices and placement of
:class:`~caffepy.dist.topology.Topology` (``set_hosts``: the ranks fill the hosts in order):

- compute: layer i's forward, then in reverse its backward, on the worker's core: ``f_i(m)``,
  ``b_i(m)`` at the sub-batch m = B / nworkers_per_group, iter_size passes;
- dense params: worker → its stub (with K > 1 the stub sums and scales: ``K_h add(n)``) → one
  message per slice to its server → the server, when its clock allows (BSP: once every group's
  stubs sent their share; ASYNC / SSP: each group's on arrival), sums the S shares
  (``S add(size)`` for S > 1) and steps the slice (``update(size)``; ``+ copy(size)`` where answers
  carry a snapshot: ASYNC, SSP, server-group replicas, which also get a SYNC every sync_frequency
  steps) → one answer per stub → the stub forwards it to each of its workers; param p's new
  version is at a worker when every slice is. SSP pushes carry a copy (``copy(n)``);
- SFB weights: the factors, ``r (N + K)`` numbers (r = rows per worker x iter_size), from every
  worker to every other; each worker rebuilds ``sum_w u_w^T v_w`` (W GEMMs the size of the
  layer's forward: ``W f_i(m)``) and steps its replica (``update(N K)``) on its own core;
- sharded tables: SPARSE_GRAD rows to every shard, the shard's step once every worker's rows are
  in (``update(rows / P x width)``), and the next forward's LOOKUP / ROWS round trip, answered
  once the shard took that step (ids taken distinct);
- waits: with wait-free backprop a layer's params leave as its backward ends and the next forward
  waits layer by layer; without it every param leaves after backward, last layer first, and the
  next step waits for all. BSP / ASYNC wait for the answer to step c - 1, SSP (staleness s) for
  the answer to step c - 1 - s.

**Costs of a message of n bytes** from rank a on host h_a to rank b on host h_b::

    same rank:    c_local                                   (a hand-over between role threads)
    other rank:   c_msg + c_byte n on a's core, then c_msg + c_byte n on b's core
    other host:   in between, w = 8 n / (eta R) on out(h_a), and w on in(h_b) from lam after the
                  egress began (the switch holds what a busy ingress cannot take yet, so a sender
                  is never blocked by another host's ingress: no head-of-line blocking)

c_local is measured in process (:mod:`caffepy.dist.calibrate`); the others are fitted from the
engine's one-way times t(n, R) between two emulated hosts (bench_transport.py): ``lam`` = plain
mpi4py's 64 B time, ``c_msg = (engine - plain) / 2`` at 64 B, and the large-message slopes at two
rates, ``s(R) = 2 c_byte + 8 / (eta R)``, solved for eta (the share of R TCP delivers) and c_byte.
Array work (sums, updates, copies) costs ``a + c n`` for n elements, measured.

**Resources and order.** Each rank has one core (as measured: a rank's worker, stub, server and
communication threads share it; ``spare_core``: its communication and server work get a core of
their own). Each host has an egress and an ingress link of rate R (full duplex, a non-blocking
fabric: a host's own link is the only wire it shares). Each resource serves work first come, first
served, one job at a time, to its end (:mod:`caffepy.dist.simulate`); a layer's forward or
backward is not interrupted (the engine makes its progress rounds between layers).

**Steady state and the barrier.** T is the mean spacing of the ends of backward over the last
intervals of the simulated steps (BSP / ASYNC: 5, SSP: 2 s + 7; an even number of intervals, as
a step whose communication runs into the next forward can make steps alternate long and short),
and at least the work per step of the busiest core or link (its busy time / steps). The
simulated workers are identical; a real BSP step also waits for the slowest of G groups,
``E[max of G] - mean ~ sigma C sqrt(2 ln G)`` (Gaussian
extremes; sigma: the measured coefficient of variation of a pass, C: the compute), which SSP's
slack spreads over s + 1 steps (``/ (s + 1)``). Not modelled: data loading, test passes,
checkpoints, the coordinator, any straggler beyond that spread, TCP slow start, and the engine's
CPU beyond its measured per-message and per-byte costs (polling, the GIL, thread wake-ups).
"""
import math

from ..errors import CaffeError
from . import waitfree
from .calibrate import build_net, net_batch
from .plan_model import Model, Result  # noqa: F401 -- Result: predict's answer

_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def parse_link(text):
    """'10gbit' → 1e10 bits/s (kbit, mbit, gbit)."""
    t = str(text).strip().lower()
    for unit, scale in _UNITS.items():
        if t.endswith(unit):
            try:
                value = float(t[:-len(unit)])
            except ValueError:
                break
            if value > 0 and math.isfinite(value):
                return value * scale
    raise ValueError("link rate '%s': expected a positive number with kbit, mbit or gbit "
                     "(e.g. 10gbit)" % text)


def default_cluster(hosts):
    """One worker group of one worker per host; one server group, a server on every host."""
    from ..proto import caffe_pb2
    c = caffe_pb2.ClusterParameter()
    c.nworker_groups, c.nservers_per_group = hosts, hosts
    return c


def predict(net_param, solver_param, cluster, costs, hosts, rate, batch=None, host=None,
            spare_core=False, opts=None, net=None):
    """The :class:`Result` for ``net_param`` trained by ``solver_param`` on ``cluster`` over
    ``hosts`` hosts linked at ``rate`` bits/s. ``batch``: a worker group's (default: the net's);
    ``host``: a measured host of the calibration file (default: the compute times measured on this
    machine); ``net``: the net already built at that batch. Adds ``samples_per_s``, ``plain_step``
    (the single-process solver's step at a worker's sub-batch m: compute + every param's update; a
    host profile's measured step) and ``efficiency`` = samples/s / (W m / plain_step), W workers:
    with one worker per host, against that many hosts each training alone."""
    batch = batch or net_batch(net_param)
    K = cluster.nworkers_per_group
    if batch % K:
        raise CaffeError("batch %d does not split into %d workers per group" % (batch, K))
    net = net or build_net(net_param, batch)
    names = net._layer_names
    times = costs.layer_times(net_param.name, names, batch // K, host)
    model = Model(net, solver_param, cluster, opts or waitfree.options(cluster), costs, times,
                  hosts, rate, spare_core)
    result = model.predict()
    compute = sum(times[0]) + sum(b for b, n in zip(times[1], net.layer_need_backward) if n)
    plain = compute * solver_param.iter_size   # a host profile's measured step has its update
    if not host:
        plain += sum(costs.array("update", n) for n in model.count)
    result.batch, result.plain_step, result.model = batch, plain, model
    result.samples_per_s = cluster.nworker_groups * batch / result.step
    result.efficiency = result.samples_per_s / (model.topo.W * (batch // K) / plain)
    return result
