"""The performance model (caffepy.dist.plan, ``caffepy plan``): its pieces on a small MLP with
round constants, and its check against the measured two-host CIFAR10-quick figures with the
calibration file shipped with caffepy."""
import json
import os

import pytest

from caffepy import cli
from caffepy.dist import plan
from caffepy.dist.calibrate import Costs, fit_transport, trainable
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers.params import load_solver_param

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALIBRATION = os.path.join(ROOT, "caffepy", "dist", "plan_calibration.json")

# ip1's weight (512 x 256) is sliced across the servers (>= SLICE_MIN elements), the rest is whole
MLP = """name: "mlp"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 32 dim: 256 } } }
layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 32 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1" inner_product_param { num_output: 512 } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" inner_product_param { num_output: 10 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""
MS = 1e-3


def transport(eta=1.0, byte=0.0, msg=10e-6, lat=10e-6):
    """One-way times a link with these constants would show (the bench_transport.py layout)."""
    def one_way(gbit, n):
        return 2 * msg + lat + n * (2 * byte + 8.0 / (eta * gbit * 1e9))
    return {"plain_64": [[10, lat], [1, lat]], "engine_64": [[10, 2 * msg + lat], [1, 2 * msg + lat]],
            "engine_large": [[g, n, one_way(g, n)] for g in (1, 10) for n in (4 << 20, 32 << 20)]}


def costs(layer_ms=1.0, cv=0.0):
    """Round constants: every layer 1 ms forward and backward at batch 32 (0.5 ms at 16), updates
    1 ns per element, sums and copies 0.1 ns, messages 10 µs a side, 10 µs latency, a perfect link."""
    names = ["data", "label", "ip1", "relu1", "ip2", "loss"]
    t = [layer_ms * MS / 2, layer_ms * MS]
    layers = [[n, "x", [0, 0] if n in ("data", "label") else t, [0, 0] if n in ("data", "label") else t]
              for n in names]
    return Costs({"arrays": {"update": [0, 1e-9], "add": [0, 1e-10], "copy": [0, 1e-10]},
                  "messages": {"local": 1e-6, "transport": transport()},
                  "compute": {"mlp": {"batches": [16, 32], "cv": cv, "layers": layers}}}, "test")


def solver():
    return load_solver_param('base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: "fixed"')


def cluster(groups, servers, **fields):
    c = caffe_pb2.ClusterParameter()
    c.nworker_groups, c.nservers_per_group = groups, servers
    for k, v in fields.items():
        if k == "consistency":
            v = caffe_pb2.ClusterParameter.Consistency.Value(v)
        elif k == "sfb_mode":
            v = caffe_pb2.ClusterParameter.SFBMode.Value(v)
        setattr(c, k, v)
    return c


def run(c, hosts, rate=1e10, batch=32, **kw):
    net = caffe_pb2.NetParameter()
    proto_io.parse_text(MLP, net)
    return plan.predict(net, solver(), c, kw.pop("costs", None) or costs(), hosts, rate, batch, **kw)


def route(result, name):
    return {r[0]: r for r in result.routes}[name]


def test_fit_transport_recovers_the_constants():
    msg, lat, byte, eta = fit_transport(transport(eta=0.93, byte=0.04e-9, msg=8e-6, lat=12e-6))
    assert msg == pytest.approx(8e-6) and lat == pytest.approx(12e-6)
    assert byte == pytest.approx(0.04e-9, rel=1e-6) and eta == pytest.approx(0.93, rel=1e-9)


def test_parse_link():
    assert plan.parse_link("10gbit") == 1e10 and plan.parse_link("25Gbit") == 2.5e10
    assert plan.parse_link("100mbit") == 1e8
    for bad in ("10", "gbit", "-1gbit", "fast"):
        with pytest.raises(ValueError, match="link rate"):
            plan.parse_link(bad)


def test_dense_bytes_per_step():
    """Each group's stub pushes every slice to its server and gets the new values back: a param of
    n elements moves 2 (G - 1) 4n bytes between hosts; with a server on every host each host moves
    4 (G - 1) / G 4n of the sliced weight; with one server its host moves all of it."""
    n, G = 512 * 256, 4
    spread = run(cluster(G, G, sfb_mode="NEVER"), G)
    _, count, kind, wire, busiest = route(spread, "ip1:0")
    assert (count, kind) == (n, "dense")
    assert wire == 2 * (G - 1) * 4 * n
    assert busiest == 4 * (G - 1) * 4 * n // G
    one = run(cluster(G, 1, sfb_mode="NEVER"), G)
    assert route(one, "ip1:0")[3:] == (2 * (G - 1) * 4 * n, 2 * (G - 1) * 4 * n)
    assert route(one, "ip2:1")[3] == 2 * (G - 1) * 4 * 10       # a bias: one message each way


def test_sfb_bytes_per_step():
    """SFB: every worker sends its factors, rows x (N + K) numbers, to every other worker."""
    W, rows = 4, 32
    r = run(cluster(W, W, sfb_mode="ALWAYS"), W)
    factors = rows * (512 + 256) * 4
    assert route(r, "ip1:0")[2:] == ("sfb", W * (W - 1) * factors, 2 * (W - 1) * factors)
    assert route(r, "ip1:1")[2] == "dense"                       # biases stay dense


def test_sfb_dense_crossover():
    """AUTO (routing.make_plan's cost model) takes SFB while the factors are the fewer bytes at the
    busiest host, dense beyond: SFB grows with W - 1, dense at most ~4n per host."""
    picked = {W: route(run(cluster(W, W), W), "ip1:0")[2] for W in (2, 4, 8, 16, 32)}
    assert picked == {2: "sfb", 4: "sfb", 8: "sfb", 16: "dense", 32: "dense"}
    for W in (8, 16):
        sfb = route(run(cluster(W, W, sfb_mode="ALWAYS"), W), "ip1:0")[4]
        dense = route(run(cluster(W, W, sfb_mode="NEVER"), W), "ip1:0")[4]
        assert (sfb < dense) == (picked[W] == "sfb")


def test_compute_bound_step_and_efficiency():
    """Fast links, dense routes: the step is the compute plus a little."""
    r = run(cluster(2, 2, sfb_mode="NEVER"), 2)
    assert r.compute == pytest.approx(8 * MS)            # 4 layers x (1 ms + 1 ms)
    assert r.compute < r.step < 1.1 * r.compute
    assert r.plain_step == pytest.approx(8 * MS + 1e-9 * sum(x[1] for x in r.routes))
    assert 0.9 < r.efficiency < 1.0
    assert r.samples_per_s == pytest.approx(2 * 32 / r.step)


def test_barrier_spread():
    """BSP waits for the slowest of G groups: sigma C sqrt(2 ln G); SSP spreads it over s + 1."""
    bsp = run(cluster(4, 4), 4, costs=costs(cv=0.05))
    assert bsp.barrier == pytest.approx(0.05 * bsp.compute * (2 * 1.3862943611) ** 0.5)
    ssp = run(cluster(4, 4, consistency="SSP", staleness=3), 4, costs=costs(cv=0.05))
    assert ssp.barrier == pytest.approx(bsp.barrier / 4)


def test_bsp_vs_ssp_on_a_slow_link():
    """At 100 Mbit/s a round trip takes longer than the compute: BSP waits for it every step, SSP
    (staleness 2) overlaps it with the next steps: the link's bytes per step set its pace."""
    rate = 1e8
    bsp = run(cluster(2, 1, sfb_mode="NEVER"), 2, rate)
    ssp0 = run(cluster(2, 1, sfb_mode="NEVER", consistency="SSP", staleness=0), 2, rate)
    ssp2 = run(cluster(2, 1, sfb_mode="NEVER", consistency="SSP", staleness=2), 2, rate)
    one_way = 8 * 4 * sum(x[1] for x in bsp.routes) / rate
    assert bsp.step > bsp.compute + 2 * 8 * 4 * 512 * 256 / rate    # ip1's weight there and back
    assert ssp0.step == pytest.approx(bsp.step, rel=0.1)   # no slack: a round trip per step
    assert ssp2.step < 0.8 * bsp.step
    assert ssp2.step == pytest.approx(one_way, rel=0.02)   # bound by the link's bytes per step


def test_wait_free_overlap_bound():
    """Wait-free backprop hides ip2's push behind ip1's backward (and the next forward of ip1),
    but ip1's weight is pushed last and read first: its round trip stays exposed."""
    rate = 1e9
    off = run(cluster(2, 1, sfb_mode="NEVER", wait_free=False), 2, rate)
    on = run(cluster(2, 1, sfb_mode="NEVER", wait_free=True), 2, rate)
    ip1 = sum(x[1] for x in on.routes if x[0].startswith("ip1"))
    ip2 = sum(x[1] for x in on.routes if x[0].startswith("ip2"))
    assert on.step >= on.compute + 2 * 8 * 4 * ip1 / rate
    assert on.step <= off.step
    hidden = off.step - on.step
    assert 0 < hidden <= 2 * 8 * 4 * ip2 / rate + 1e-5     # at most ip2's own round trip
    assert hidden <= 4 * MS                                # the compute it can overlap


def test_spare_core_moves_the_communication_off_the_worker():
    r = run(cluster(4, 4), 4, spare_core=True)
    shared = run(cluster(4, 4), 4)
    assert r.messages == 0 and shared.messages > 0
    assert r.step <= shared.step


def test_errors_are_one_line(tmp_path):
    with pytest.raises(Exception, match="every host needs a rank"):
        run(cluster(2, 1), 3)
    bad = tmp_path / "c.json"
    bad.write_text("{")
    with pytest.raises(Exception, match="c.json: not JSON"):
        Costs.load(str(bad))
    bad.write_text(json.dumps({"arrays": {}}))
    with pytest.raises(Exception, match="c.json: not a calibration file"):
        Costs.load(str(bad))
    with pytest.raises(Exception, match="test has no compute times for net 'other'"):
        costs().layer_times("other", ["ip1"], 32)


def test_trainable_turns_a_deploy_net_into_a_training_net():
    deploy = caffe_pb2.NetParameter()
    proto_io.parse_text(MLP.replace('type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label"',
                                    'type: "Softmax" bottom: "ip2"'), deploy)
    del deploy.layer[1]                                            # no label input
    out = trainable(deploy, 8)
    assert [lp.name for lp in out.layer][:2] == ["label", "data"]
    assert out.layer[-1].type == "SoftmaxWithLoss" and list(out.layer[-1].bottom) == ["ip2", "label"]
    assert out.layer[1].input_param.shape[0].dim[0] == 8


def test_predicts_the_measured_two_host_cifar10_quick_step():
    """BENCHMARKS.md, bench_scaling.py: one host 1277.9 samples/s at batch 100; two hosts at
    10 Gbit/s, wait-free off, one server: 2177.9 samples/s at batch 50 per host. Within 15%."""
    c = Costs.load(CALIBRATION)
    net = proto_io.read_net(os.path.join(ROOT, "models/cifar10_quick/cifar10_quick_train_test.prototxt"))
    param = load_solver_param('base_lr: 0.001 momentum: 0.9 weight_decay: 0.004 lr_policy: "fixed"')
    one = plan.predict(net, param, plan.default_cluster(1), c, 1, 1e10, batch=100)
    assert 100 / one.plain_step == pytest.approx(1277.9, rel=0.15)
    two = plan.predict(net, param, cluster(2, 1, wait_free=False), c, 2, plan.parse_link("10gbit"), batch=50)
    assert two.samples_per_s == pytest.approx(2177.9, rel=0.15)
    assert route(two, "ip1:0")[2] == "sfb"                     # AUTO's choice at 2 x 50 rows


def _files(tmp_path):
    (tmp_path / "net.prototxt").write_text(MLP)
    (tmp_path / "solver.prototxt").write_text(
        'net: "%s" base_lr: 0.01 momentum: 0.9 lr_policy: "fixed"\n' % (tmp_path / "net.prototxt"))
    cal = tmp_path / "cal.json"
    data = {"arrays": {"update": [0, 1e-9], "add": [0, 1e-10], "copy": [0, 1e-10]},
            "messages": {"local": 1e-6, "transport": transport()},
            "compute": {"mlp": costs().compute["mlp"]}}
    cal.write_text(json.dumps(data))
    return str(tmp_path / "solver.prototxt"), str(cal)


@pytest.mark.slow
def test_cli_prints_routes_and_the_predicted_step(tmp_path, capsys):
    solver_file, cal = _files(tmp_path)
    assert cli.main(["plan", "--solver", solver_file, "--hosts", "4", "--link", "10gbit",
                     "--calibration", cal]) == 0
    out = capsys.readouterr().out
    assert "on 4 hosts at 10gbit: 4 worker groups x 1 (batch 32 each), 1 server groups x 4" in out
    assert "ip1:0" in out and "sfb" in out and "ip2:0" in out
    for word in ("compute", "server", "messages", "waiting", "barrier", "steps/s", "efficiency"):
        assert word in out
    assert cli.main(["plan", "--solver", solver_file, "--table", "--link", "1gbit,10gbit",
                     "--calibration", cal, "--consistency", "SSP", "--staleness", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.strip()[:2].strip().isdigit()]
    assert len(rows) == 12


@pytest.mark.parametrize("extra, message", [
    (["--solver", "missing.prototxt"], "solver file missing.prototxt does not exist"),
    (["--link", "fast"], "link rate 'fast'"),
    (["--hosts", "0"], "--hosts must be >= 1"),
    (["--calibration", "nowhere.json"], "nowhere.json"),
    (["--cluster", "nowhere.prototxt"], "cluster file nowhere.prototxt does not exist"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, extra, message):
    solver_file, cal = _files(tmp_path)
    args = ["plan", "--solver", solver_file, "--calibration", cal] + extra
    assert cli.main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("caffepy plan: error:")
