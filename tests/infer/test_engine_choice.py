"""How auto chooses inference mode's engine (caffepy.infer.choice / engine): the fastest candidate
that passes the check wins, a failing one never does, the choice is cached (a hit times nothing;
a corrupt or foreign file is ignored), the cache key; caffepy's trial plan leaves the net as it
was; the openvino engine against the exact path, and named when it is absent. No assertion
depends on a measured time: candidates' times are given."""
import json
import logging
import sys

import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.infer import choice, engine
from caffepy.testing.random_weights import randomize

from .test_optimize import FIRE, SMALL, _net
from .test_ort import CUT, _pair, _rel, pylayers  # noqa: F401  (pylayers: a fixture)


def _counted(times):
    """{name: measure} returning ``times[name]``, and the list of the names measured."""
    calls = []

    def measure(name):
        calls.append(name)
        return times[name]
    return {n: (lambda n=n: measure(n)) for n in times}, calls


def _openvino():
    try:
        import openvino  # noqa: F401
    except ImportError:
        pytest.skip("openvino is not installed (pip install 'caffepy[openvino]')")


# -- the choice ------------------------------------------------------------------------------------
def test_the_fastest_candidate_that_passed_wins_and_is_stored(_engine_cache):
    measures, calls = _counted({"onnxruntime": 0.3, "openvino": 0.1, "caffepy": 0.2})
    assert choice.decide("k", measures) == ("openvino", {"onnxruntime": 300.0, "openvino": 100.0,
                                                         "caffepy": 200.0}, False)
    # the second round: the contenders (within twice the fastest) again, in the reverse order
    assert calls == ["onnxruntime", "openvino", "caffepy", "caffepy", "openvino"]
    stored = json.loads(_engine_cache.read_text())
    assert stored["format"] == choice.FORMAT and stored["entries"]["k"]["engine"] == "openvino"


def test_a_candidate_that_failed_its_check_is_never_chosen(_engine_cache):
    measures, _ = _counted({"openvino": None, "onnxruntime": 0.5, "caffepy": 0.9})
    name, ms, _ = choice.decide("k", measures)
    assert name == "onnxruntime" and ms["openvino"] is None
    measures, _ = _counted({"openvino": None, "caffepy": None})
    assert choice.decide("k2", measures)[0] is None
    assert "k2" not in json.loads(_engine_cache.read_text())["entries"]      # nothing stored


def test_a_cache_hit_measures_nothing(_engine_cache):
    measures, calls = _counted({"onnxruntime": 0.2, "caffepy": 0.1})
    choice.decide("k", measures)
    calls.clear()
    assert choice.decide("k", measures) == ("caffepy", {"onnxruntime": 200.0, "caffepy": 100.0},
                                            True)
    assert calls == []
    assert choice.decide("other", measures)[2] is False
    assert calls == ["onnxruntime", "caffepy", "caffepy", "onnxruntime"]
    calls.clear()
    assert choice.decide("k", measures, use_cache=False)[2] is False and len(calls) == 4


def _rounds(times):
    """{name: measure} whose k-th call returns ``times[name][k]``, and the names measured."""
    calls = []

    def measure(name):
        calls.append(name)
        return times[name][calls.count(name) - 1]
    return {n: (lambda n=n: measure(n)) for n in times}, calls


def test_load_during_one_round_does_not_decide_the_choice(_engine_cache):
    """openvino's first round ran under another process's load (twice its time): its second
    round, timed after caffepy's, wins; each candidate keeps the lesser of its times."""
    measures, calls = _rounds({"caffepy": [0.035, 0.036], "onnxruntime": [0.040, 0.039],
                               "openvino": [0.043, 0.0215]})
    name, ms, cached = choice.decide("k", measures)
    assert (name, cached) == ("openvino", False)
    assert ms == {"caffepy": 35.0, "onnxruntime": 39.0, "openvino": 21.5}
    assert calls == ["caffepy", "onnxruntime", "openvino", "openvino", "onnxruntime", "caffepy"]


def test_the_second_round_skips_failed_and_far_slower_candidates(_engine_cache):
    measures, calls = _rounds({"caffepy": [0.1, 0.1], "onnxruntime": [None],
                               "openvino": [0.21]})
    assert choice.decide("k", measures)[0] == "caffepy"
    assert calls == ["caffepy", "onnxruntime", "openvino"]       # nothing left to compare
    assert choice.contenders({"a": 0.1}) == [] and choice.contenders({"a": None, "b": 1}) == []
    assert choice.contenders({"a": 0.3, "b": 0.1, "c": 0.2, "d": None}) == ["b", "c"]


def test_a_candidate_failing_in_the_second_round_is_never_chosen(_engine_cache):
    measures, _ = _rounds({"caffepy": [0.2, 0.2], "openvino": [0.1, None]})
    name, ms, _ = choice.decide("k", measures)
    assert name == "caffepy" and ms["openvino"] is None


@pytest.mark.parametrize("text", ["{not json", json.dumps({"format": "another/1", "entries": {}}),
                                  json.dumps([1, 2]), "\xff\xfe"])
def test_a_corrupt_or_foreign_cache_is_ignored_with_one_warning(_engine_cache, text, caplog,
                                                                monkeypatch):
    monkeypatch.setattr(choice, "_warned", set())
    _engine_cache.write_text(text, encoding="latin-1")
    measures, calls = _counted({"onnxruntime": 0.2, "caffepy": 0.1})
    with caplog.at_level(logging.WARNING, logger="caffepy.infer.choice"):
        assert choice.decide("k", measures)[0] == "caffepy"
        choice.decide("k2", measures)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and "ignored" in lines[0] and str(_engine_cache) in lines[0]
    assert calls == ["onnxruntime", "caffepy", "caffepy", "onnxruntime"] * 2
    entries = json.loads(_engine_cache.read_text())["entries"]      # written anew, ours
    assert entries["k2"]["engine"] == "caffepy"


def test_only_a_known_engine_name_is_taken_from_the_cache(_engine_cache):
    _engine_cache.write_text(json.dumps({"format": choice.FORMAT, "entries": {
        "k": {"engine": "os.system('rm -rf /')", "ms": {}},
        "k2": {"engine": "caffepy", "ms": {"caffepy": "1; drop", "onnxruntime": 2.5,
                                           "ghost": 1.0, "openvino": True}}}}))
    measures, calls = _counted({"onnxruntime": 0.2, "caffepy": 0.1})
    assert choice.decide("k", measures)[2] is False and len(calls) == 4
    assert choice.decide("k2", measures) == ("caffepy", {"onnxruntime": 2.5}, True)


def test_a_nan_fails_the_check_whatever_the_order():
    assert choice.worst({"a": 1e-7, "b": 2e-5}, 1e-4) is None
    for errors in ({"a": 1e-7, "prob": float("nan")}, {"prob": float("nan"), "a": 1e-7},
                   {"a": 0.5, "prob": float("nan")}):
        assert "blob 'prob' differs from the exact path by nan" in choice.worst(errors, 1e-4)
    assert "blob 'a' differs" in choice.worst({"a": 0.5, "b": 2e-5}, 1e-4)


def test_the_timing_is_bounded():
    """WARMUP + RUNS passes at most; past the budget one warm-up pass and one timed one."""
    now = [0.0]
    passes = []

    def forward(step):
        passes.append(step)
        now[0] += step
    fast = choice.median_time(lambda: forward(0.001), clock=lambda: now[0])
    assert len(passes) == choice.WARMUP + choice.RUNS and fast == pytest.approx(0.001)
    passes.clear()
    slow = choice.median_time(lambda: forward(10.0), clock=lambda: now[0])
    assert len(passes) == 2 and slow == pytest.approx(10.0)
    passes.clear()
    choice.median_time(lambda: forward(10.0), least=5, clock=lambda: now[0])
    assert len(passes) == 6                 # caffepy's steps: 5 warm-up passes whatever the budget


def test_the_key_follows_shapes_keep_threads_and_versions(monkeypatch):
    monkeypatch.delenv("CAFFEPY_THREADS", raising=False)
    net = _net(SMALL)
    v = choice.versions()
    base = choice.key(net, [], 2, v)
    assert base == choice.key(_net(SMALL), [], 2, v)
    assert base != choice.key(net, [], 1, v)
    assert base != choice.key(net, ["ip"], 2, v)
    assert base != choice.key(net, [], 2, dict(v, openvino="9999.1"))
    assert base != choice.key(net, [], 2, dict(v, caffepy="0.0.0"))
    assert base != choice.key(net, [], 2, v, threads="fixed")
    assert base != choice.key(_net(SMALL, batch=5), [], 2, v)
    assert base != choice.key(_net(FIRE), [], 2, v)
    monkeypatch.setenv("CAFFEPY_NUMBA", "0")
    assert base != choice.key(net, [], 2, v)


# -- auto on a net -------------------------------------------------------------------------------
def _given_times(monkeypatch, times):
    """Each candidate of auto 'takes' times[its engine] seconds; returns the engines timed."""
    timed = []

    def fake(self, forward, least=1):
        name = forward.__self__.engine
        timed.append(name)
        return times[name]
    monkeypatch.setattr(engine._Candidates, "_time", fake)
    return timed


def test_auto_runs_the_fastest_and_a_second_plan_times_nothing(monkeypatch, caplog):
    timed = _given_times(monkeypatch, {"onnxruntime": 0.3, "openvino": 0.2, "caffepy": 0.1})
    exact = _net(SMALL)
    randomize(exact, 3)
    x = np.random.default_rng(1).standard_normal(exact.blobs["data"].shape)
    want = exact.forward(data=x)["prob"].copy()
    first = _net(SMALL)
    first.copy_trained_layers_from(exact.to_proto())
    with caplog.at_level(logging.INFO, logger="caffepy.infer.engine"):
        plan = first.optimize()
    assert plan.engine == "caffepy" and plan.choice["cached"] is False
    assert "caffepy" in timed and "onnxruntime" in timed
    line = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(line) == 1 and "runs caffepy (caffepy 100 ms, " in line[0]
    assert _rel(first.forward(data=x)["prob"], want) <= 1e-5
    timed.clear()
    second = _net(SMALL)
    second.copy_trained_layers_from(exact.to_proto())
    plan = second.optimize()
    assert plan.engine == "caffepy" and plan.choice["cached"] is True and timed == []
    assert _rel(second.forward(data=x)["prob"], want) <= 1e-5


def test_auto_builds_and_checks_each_candidate_once_over_both_rounds(monkeypatch, _engine_cache):
    """The second round times the runtime plans built in the first (no second build or check)
    and a new caffepy trial (not checked again); a runtime out of contention is let go and its
    first time stands."""
    timed = _given_times(monkeypatch, {"onnxruntime": 0.5, "openvino": 0.15, "caffepy": 0.1})
    built, checked = [], []
    real_try = engine.try_runtime
    monkeypatch.setattr(engine, "try_runtime", lambda net, name, *a: built.append(name)
                        or real_try(net, name, *a))
    real_worst = choice.worst
    monkeypatch.setattr(choice, "worst", lambda errors, rtol: checked.append(1)
                        or real_worst(errors, rtol))
    net = _net(SMALL)
    randomize(net, 5)
    plan = net.optimize()
    runtimes = [n for n in ("onnxruntime", "openvino") if engine._module(n).available()]
    assert plan.engine == "caffepy" and sorted(built) == sorted(runtimes)
    assert len(checked) == 1 + len(runtimes)
    again = ["openvino"] if "openvino" in runtimes else []
    first = ["caffepy"] + runtimes
    assert timed == (first + again + ["caffepy"] if again else first)
    if "onnxruntime" in runtimes:
        assert plan.choice["ms"]["onnxruntime"] == 500.0


def test_auto_never_runs_a_candidate_whose_check_failed(monkeypatch):
    """onnxruntime is 'fastest' but its parts are wrong (a wrong weight after the check's
    build): auto leaves it out; the net still matches the exact path."""
    from caffepy.infer import ort as ort_mod
    _given_times(monkeypatch, {"onnxruntime": 0.001, "openvino": 0.5, "caffepy": 0.4})
    real = ort_mod.OrtPlan.check

    def wrong(self, reference=None, seed=0):
        errors = real(self, reference, seed)
        return dict(errors, prob=1.0) if self.engine == "onnxruntime" else errors
    monkeypatch.setattr(ort_mod.OrtPlan, "check", wrong)
    net = _net(FIRE)
    randomize(net)
    plan = net.optimize()
    assert plan.engine != "onnxruntime" and plan.choice["ms"]["onnxruntime"] is None


def test_the_trial_plan_leaves_the_net_as_it_was():
    """caffepy's candidate folds into copies and puts blobs, arrays and shapes back."""
    from caffepy.infer import plan as plan_mod
    net = _net(SMALL)
    randomize(net)
    x = np.random.default_rng(2).standard_normal(net.blobs["data"].shape)
    want = {k: v.copy() for k, v in net.forward(data=x).items()}
    weights = {(n, i): b.data.copy() for n, bs in net.params.items() for i, b in enumerate(bs)}
    blobs = dict(net.blobs)
    memory = {n: (b.shape, b.data.__array_interface__["data"][0]) for n, b in blobs.items()}
    with plan_mod.trial(net) as trial:
        trial.forward()
        assert any(isinstance(b, plan_mod.FoldedBlob) for b in net.blobs.values())
    assert dict(net.blobs) == blobs
    assert {n: (b.shape, b.data.__array_interface__["data"][0])
            for n, b in net.blobs.items()} == memory
    for (n, i), w in weights.items():
        assert np.array_equal(net.params[n][i].data, w), n
    got = net.forward(data=x)
    for k in want:
        assert np.array_equal(got[k], want[k]), k


def test_auto_with_a_source_layer_leaves_its_cursor(pylayers, monkeypatch):  # noqa: F811
    """The check replays the source layer's batch to every candidate and the timing's passes
    are undone: the first forward after auto sees the first batch."""
    _given_times(monkeypatch, {"onnxruntime": 0.3, "openvino": 0.2, "caffepy": 0.1})
    text = CUT.replace('layer { name: "data" type: "Input" top: "data" input_param { shape { '
                       'dim: 2 dim: 3 dim: 9 dim: 8 } } }',
                       'layer { name: "data" type: "Python" top: "data" python_param { '
                       'module: "caffepy_test_ort_layers" layer: "Counter" } }')
    exact = _net(text)
    randomize(exact)
    fast = _net(text)
    fast.copy_trained_layers_from(exact.to_proto())
    assert fast.optimize().choice["ms"]["caffepy"] == 100.0
    assert fast.layers[0].n == 0
    for _ in range(2):
        np.testing.assert_allclose(fast.forward()["prob"], exact.forward()["prob"], rtol=1e-5,
                                   atol=1e-7)


# -- the openvino engine ---------------------------------------------------------------------------
@pytest.mark.parametrize("source,keep", [(SMALL, ["ip2"]), (FIRE, ["ip"])], ids=["small", "fire"])
def test_openvino_matches_the_exact_path(source, keep):
    _openvino()
    from caffepy.infer.threads import limit
    exact, fast = _pair(source, engine="openvino", keep=keep)
    plan = fast._plan
    assert [p.kind for p in plan.parts] == ["onnxruntime"] and plan.steps[0].name.startswith(
        "openvino[")
    compiled = plan.sessions[id(plan.parts[0])][0]
    assert str(compiled.get_property("INFERENCE_PRECISION_HINT")) in ("<Type: 'float32'>", "f32")
    assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == limit()
    x = np.random.default_rng(4).standard_normal(exact.blobs["data"].shape)
    want, got = exact.forward(blobs=keep, data=x), fast.forward(blobs=keep, data=x)
    for k in want:
        assert _rel(got[k], want[k]) <= 1e-5, k
    with pytest.raises(NetError, match="inside openvino"):
        fast.blobs["r1" if source is SMALL else "c0"].data


def test_openvino_runs_the_parts_and_caffepy_layers_between_them(pylayers):  # noqa: F811
    _openvino()
    exact, fast = _pair(CUT, engine="openvino", keep=["ip"])
    assert [s.name for s in fast._plan.steps] == ["openvino[conv1..conv1_relu1_0_split]", "py",
                                                  "openvino[conv2..cat]", "mish",
                                                  "openvino[pool..prob]"]
    for n in (2, 3):                         # a new batch rebuilds the parts
        x = np.random.default_rng(n).standard_normal((n, 3, 9, 8))
        for net in (exact, fast):
            net.blobs["data"].reshape(x.shape)
            net.reshape()
        want, got = exact.forward(blobs=["py", "mish"], data=x), \
            fast.forward(blobs=["py", "mish"], data=x)
        for k in want:
            assert _rel(got[k], want[k]) <= 1e-5, k


@pytest.mark.parametrize("name", ["onnxruntime", "openvino"])
def test_runtimes_run_the_weights_of_the_plan(name):
    """Both runtimes hold the weights the net had when planned: an in-place edit afterwards is
    not seen (until a new input shape rebuilds a part), loading weights is refused."""
    if name == "openvino":
        _openvino()
    exact, fast = _pair(FIRE, engine=name)
    x = np.random.default_rng(4).standard_normal(exact.blobs["data"].shape)
    before = fast.forward(data=x)["prob"].copy()
    fast.params["ip"][0].data[...] = 0
    assert np.array_equal(fast.forward(data=x)["prob"], before)
    with pytest.raises(NetError, match="loading weights is not available in optimize mode"):
        fast.copy_from("w.caffemodel")


def test_openvino_named_without_it_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "openvino", None)           # import fails
    with pytest.raises(NetError, match=r"^net 'small': engine 'openvino' of optimize mode: "
                                       r"openvino is not installed \(pip install "
                                       r"'caffepy\[openvino\]'\)$"):
        _net(SMALL).optimize(engine="openvino")
    monkeypatch.setenv(engine.ENV, "openvino")
    with pytest.raises(NetError, match="engine 'openvino'.*not installed"):
        _net(SMALL).optimize()
    from caffepy import cli
    monkeypatch.delenv(engine.ENV)
    (tmp_path / "net.prototxt").write_text(SMALL)
    assert cli.main(["time", "-model", str(tmp_path / "net.prototxt"), "-iterations", "1",
                     "--optimize", "--engine", "openvino"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "engine 'openvino' of optimize mode: openvino is not installed" in err[-1]


@pytest.mark.parametrize("text", [SMALL, FIRE], ids=["small", "fire"])
def test_every_candidate_passes_the_check_on_a_plain_net(text, monkeypatch, _engine_cache):
    """The exact path's values are taken before caffepy's trial changes the layers: computed
    inside it, they differed from every candidate's (a zoo SqueezeNet had all three engines
    left out, and auto fell back to caffepy's steps)."""
    _given_times(monkeypatch, {"onnxruntime": 0.3, "openvino": 0.2, "caffepy": 0.1})
    net = _net(text)
    randomize(net, 4)
    plan = net.optimize()
    assert plan.choice["ms"]["caffepy"] is not None
    if engine._module("onnxruntime").available():
        assert plan.choice["ms"]["onnxruntime"] is not None
