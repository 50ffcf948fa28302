"""Checkpoints that scale and verify: raw buffers, sizes and checksums in the manifest, fallback to
the previous complete step, checkpoint_keep, no silent overwrite, the format of caffepy 0.1."""
import logging
import os
import shutil
import struct

import numpy as np
import pytest

import nets
from conftest import needs_mpi
from caffepy import dist
from caffepy.dist import checkpoint
from caffepy.errors import CaffeError
from caffepy.solvers import get_solver

G, K, B = 1, 2, 4
FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                       "dist_ckpt_v1")


def _run(workspace, max_iter, resume=False, freq=5, solver_type="Adam", overwrite=False, **cluster):
    """The MLP on 1 group x 2 workers, 2 servers (the configuration of the 0.1 fixture). The
    fixture's routes are pinned (ip1 SFB, ip2 dense, as 0.1's AUTO chose): the SFB cost model that
    counts workers now sends ip2 to SFB as well, which changes the arithmetic of the steps."""
    cluster.setdefault("dense_layer", ["ip2"])
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, max_iter, solver_type, "checkpoint_frequency: %d" % freq),
                        dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(workspace), **cluster)

    def feed(w, n, net):          # format 1 saved no data state: the feeder positions the data
        nets.feeder(x, y)(w, n, net)
        net.layers[0].pos = solver.iter * net.layers[0].batch_size % net.layers[0].n
    result = dist.train(solver, cluster=c, resume=resume, feeder=feed, overwrite=overwrite)
    return solver, result


def _params(solver):
    return [p.data.copy() for p in solver.net.learnable_params]


def _same(a, b):
    return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    ws = tmp_path_factory.mktemp("full")
    solver, _ = _run(ws, 15)
    return _params(solver)


def test_raw_format_and_manifest(tmp_path):
    _run(tmp_path, 5)
    d = tmp_path / "checkpoint"
    m = checkpoint.read_manifest(str(d / "step5.manifest"))
    assert m.format == 3 and len(m.size) == len(m.checksum) == len(m.file) == K + 2
    for f, size, digest in zip(m.file, m.size, m.checksum):
        raw = (d / f).read_bytes()
        assert len(raw) == size and digest.startswith("blake2b:")
        assert raw[:8] == checkpoint.MAGIC
        header = struct.unpack("<Q", raw[8:16])[0]
        ck, slices = checkpoint.read_slices(str(d / f))
        payload = sum(v.nbytes + sum(h.nbytes for h in hist) for _, v, hist in slices)
        assert 16 + header + payload == size           # values only in the raw payload
        for s in ck.slices:
            assert not len(s.data.double_data) and not len(s.data.data)
    assert (d / "step5-worker1.bin").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_file_falls_back_with_warning(tmp_path, full_run, caplog, damage):
    _run(tmp_path, 10)
    bad = tmp_path / "checkpoint" / "step10-server1.bin"
    raw = bytearray(bad.read_bytes())
    if damage == "truncate":
        bad.write_bytes(bytes(raw[:len(raw) // 2]))
    else:
        raw[-3] ^= 0xFF                          # same size, different bytes: only the checksum sees it
        bad.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="caffepy"):
        solver, result = _run(tmp_path, 15, resume=True)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("step 10" in w and str(bad) in w for w in warned), warned
    assert result.step == 15 and _same(_params(solver), full_run)    # resumed from step 5


def test_checkpoint_keep(tmp_path):
    _run(tmp_path, 20, checkpoint_keep=2)
    names = sorted(os.listdir(tmp_path / "checkpoint"))
    assert {n.split("-")[0].split(".")[0] for n in names} == {"step15", "step20"}, names


def test_no_silent_overwrite(tmp_path):
    _run(tmp_path, 5)
    with pytest.raises(CaffeError) as e:
        _run(tmp_path, 5)
    msg = str(e.value)
    assert "\n" not in msg and "--resume" in msg and "--overwrite" in msg and "step 5" in msg
    with pytest.raises(CaffeError, match="not both"):
        _run(tmp_path, 5, resume=True, overwrite=True)
    _run(tmp_path, 3, freq=0, overwrite=True)
    assert [s for s, _ in checkpoint.manifests(str(tmp_path))] == [3]


def test_format_1_checkpoint_resumes(tmp_path, full_run):
    """tests/fixtures/dist_ckpt_v1: step 5 of this run written by caffepy 0.1 (float lists, no sizes)."""
    shutil.copytree(FIXTURE, str(tmp_path / "ws"))
    step, manifest = checkpoint.latest_complete(str(tmp_path / "ws"), verify=True)
    assert step == 5 and not len(manifest.size)
    solver, result = _run(tmp_path / "ws", 15, resume=True)
    assert result.step == 15 and _same(_params(solver), full_run)


def test_any_size_slice_round_trip(tmp_path):
    """A slice is raw bytes addressed by 64-bit offsets: no protobuf message holds its values."""
    values = np.arange(3 * 1000003, dtype=np.float32)
    s = checkpoint.make_slice("big", 0, 0, 0, 1, values, [values[::-1].copy()])
    name = checkpoint.write_file(str(tmp_path), 1, "server", 0, [s])
    ck, [(msg, got, hist)] = checkpoint.read_slices(str(tmp_path / "checkpoint" / name))
    assert ck.ByteSize() < 200 and msg.raw_length == values.size
    assert np.array_equal(got, values) and np.array_equal(hist[0], values[::-1])


_VISIBILITY = """
import sys
from mpi4py import MPI
from caffepy.dist.workspace import preflight
from caffepy.errors import CaffeError
rank = MPI.COMM_WORLD.Get_rank()
ws = sys.argv[1] + ("/rank%d" % rank if sys.argv[2] == "private" else "")
try:
    preflight(ws, False, False, MPI.COMM_WORLD)
except CaffeError as e:
    print("ERROR rank %d: %s" % (rank, e))
    sys.exit(1)
print("OK rank %d" % rank)
"""


@needs_mpi
@pytest.mark.parametrize("kind", ["shared", "private"])
def test_workspace_every_rank_sees(tmp_path, kind):
    """Each rank writes a token file; rank 0 must see them all (emulated: a per-rank workspace)."""
    import subprocess
    import sys
    from conftest import ROOT
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-c", _VISIBILITY, str(tmp_path), kind],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, timeout=120)
    if kind == "shared":
        assert p.returncode == 0 and p.stdout.count("OK rank") == 2, p.stdout + p.stderr[-2000:]
        return
    # every rank raises the same line; the launcher may stop one before it prints, once another exits
    lines = [line for line in p.stdout.splitlines() if line.startswith("ERROR")]
    assert p.returncode != 0 and lines, p.stdout + p.stderr[-2000:]
    assert all("is not shared" in line and "rank 1 (host " in line for line in lines), lines
