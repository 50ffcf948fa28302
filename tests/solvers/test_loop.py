"""The solver loop: glog lines, smoothing, test nets, callbacks, actions, NaN hunting, debug_info."""
import re

import numpy as np
import pytest

from caffepy.errors import SolverError

from .helpers import REGRESSION_NET, batches, capture_log, feed, make_solver, reset_log

GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} [ \d]{5,} [\w.]+:\d+\] ")
XS, YS = batches(10, seed=2)


@pytest.fixture
def logs():
    stream = capture_log()
    yield stream
    reset_log()


def _lines(stream):
    return [line for line in stream.getvalue().splitlines() if GLOG.match(line)]


def test_log_lines_match_caffe(logs):
    s = make_solver('base_lr: 0.1 lr_policy: "fixed" max_iter: 4 display: 2 test_iter: 2 '
                    'test_interval: 2 test_compute_loss: true snapshot_after_train: false')
    s.solve()
    text = [GLOG.sub("", line) for line in _lines(logs)]
    tags = [re.search(r"\] ", line) and line.split()[3] for line in _lines(logs)]
    assert "Solving regression" in text and "Learning Rate Policy: fixed" in text
    assert "Iteration 0, Testing net (#0)" in text
    assert text.index("Iteration 0, Testing net (#0)") < text.index("Iteration 2, Testing net (#0)")
    assert any(re.fullmatch(r"Iteration 2 \([\d.e+-]+ iter/s, [\d.e+-]+s/2 iters\), loss = [\d.e+-]+", t)
               for t in text)
    assert any(re.fullmatch(r"    Train net output #0: loss = ([\d.e+-]+) \(\* 1 = \1 loss\)", t)
               for t in text)
    assert "Iteration 2, lr = 0.1" in text
    assert any(re.fullmatch(r"    Test net output #0: loss = [\d.e+-]+ \(\* 1 = [\d.e+-]+ loss\)", t)
               for t in text)
    assert any(t.startswith("Test loss: ") for t in text)
    assert re.fullmatch(r"Iteration 4, loss = [\d.e+-]+", text[-5])
    assert text[-1] == "Optimization Done."
    assert "solver.cpp:239]" in tags and "sgd_solver.cpp:112]" in tags and "solver.cpp:414]" in tags


def test_smoothed_loss_and_train_outputs(logs):
    s = make_solver('base_lr: 0.0 lr_policy: "fixed" display: 1 average_loss: 3')
    losses = []
    for i in range(5):
        feed(s, XS, YS, i)
        s.step(1)
        losses.append(float(s.net.blobs["loss"].data))
    # one step() per call: the window restarts each call, so smoothed == the last loss
    assert s.smoothed_loss == pytest.approx(losses[-1])
    s2 = make_solver('base_lr: 0.0 lr_policy: "fixed" display: 1 average_loss: 3')
    seen = []
    s2.add_callback(lambda: feed(s2, XS, YS, s2.iter), lambda: seen.append(float(s2.net.blobs["loss"].data)))
    s2.step(5)
    assert s2.smoothed_loss == pytest.approx(np.mean(seen[-3:]))


def test_test_nets_states_and_initialization(logs):
    net = REGRESSION_NET.replace('layer { name: "loss"',
                                 'layer { name: "extra" type: "Power" bottom: "ip" top: "extra" '
                                 'include { stage: "x" } }\nlayer { name: "loss"')
    s = make_solver('base_lr: 0.1 lr_policy: "fixed" test_iter: 1 test_iter: 3 test_interval: 3 '
                    'test_initialization: false test_state { stage: "x" } test_state { } '
                    'train_state { stage: "x" }', net=net)
    assert len(s.test_nets) == 2
    assert "extra" in s.net._layer_names and "extra" in s.test_nets[0]._layer_names
    assert "extra" not in s.test_nets[1]._layer_names
    s.step(4)
    text = logs.getvalue()
    assert "Iteration 0, Testing net" not in text
    assert "Iteration 3, Testing net (#0)" in text and "Iteration 3, Testing net (#1)" in text
    assert s.test_scores[1] and len(s.test_scores[0]) == 1 + s.test_nets[0].blobs["extra"].count
    # test nets share the train net's weights
    assert np.shares_memory(s.test_nets[0].params["ip"][0].data, s.net.params["ip"][0].data)
    with pytest.raises(SolverError, match="test_state must be unspecified or specified once"):
        make_solver('base_lr: 0.1 lr_policy: "fixed" test_iter: 1 test_interval: 3 '
                    'test_state { } test_state { }')
    with pytest.raises(SolverError, match="test_interval must be > 0"):
        make_solver('base_lr: 0.1 lr_policy: "fixed" test_iter: 1')


def test_callbacks_order():
    s = make_solver('base_lr: 0.1 lr_policy: "fixed"')
    events = []

    class Cb(object):
        def on_start(self):
            events.append(("start", s.iter))
            feed(s, XS, YS, s.iter)

        def on_gradients_ready(self):
            g = s.net.params["ip"][0].diff
            events.append(("ready", s.iter, bool(np.any(g != 0))))

    s.add_callback(Cb())
    s.step(2)
    assert events == [("start", 0), ("ready", 0, True), ("start", 1), ("ready", 1, True)]


def test_actions_stop_and_snapshot(tmp_path, logs):
    s = make_solver('base_lr: 0.1 lr_policy: "fixed" max_iter: 10 snapshot_prefix: "%s/r"' % tmp_path)
    requests = {2: "snapshot", 5: "stop"}
    s.set_action_function(lambda: requests.get(s.iter, "none"))
    s.solve()
    assert s.iter == 5
    assert (tmp_path / "r_iter_2.solverstate").exists() and (tmp_path / "r_iter_5.solverstate").exists()
    assert "Optimization stopped early." in logs.getvalue()
    assert "Optimization Done." not in logs.getvalue()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_nonfinite_loss_names_the_layer():
    s = make_solver('base_lr: 0.1 lr_policy: "fixed"')
    feed(s, XS, YS, 0)
    s.net.params["ip"][0].data[0, 0] = np.nan
    with pytest.raises(SolverError) as e:
        s.step(1)
    msg = str(e.value)
    assert "iteration 0: loss = nan" in msg and "layer 'ip' (InnerProduct)" in msg
    assert "param blob 0 is non-finite" in msg and "\n" not in msg
    # in place: the layer that produced the NaN is blamed, not the blob's first producer
    net = REGRESSION_NET.replace('layer { name: "loss"',
                                 'layer { name: "log" type: "Log" bottom: "ip" top: "ip" }\n'
                                 'layer { name: "loss"')
    s = make_solver('base_lr: 0.1 lr_policy: "fixed"', net=net)
    feed(s, XS, YS, 0)
    s.net.params["ip"][1].data[...] = -100.0
    with pytest.raises(SolverError, match="top 'ip' of layer 'log' \\(Log\\)"):
        s.step(1)


def test_debug_info(logs):
    s = make_solver('base_lr: 0.1 lr_policy: "fixed" display: 1 debug_info: true test_iter: 1 '
                    'test_interval: 5')
    feed(s, XS, YS, 0)
    s.step(1)
    text = logs.getvalue()
    test_part = text[text.index("Testing net (#0)"):text.index("Test net output #0")]
    assert "[Forward] Layer ip, top blob ip data:" in test_part
    w = s.net.params["ip"][0]
    for pattern in [r"    \[Forward\] Layer ip, top blob ip data: [\d.e+-]+",
                    r"    \[Forward\] Layer ip, param blob 0 data: [\d.e+-]+",
                    r"    \[Backward\] Layer loss, bottom blob ip diff: [\d.e+-]+",
                    r"    \[Backward\] Layer ip, param blob 1 diff: [\d.e+-]+",
                    r"    \[Update\] Layer ip, param 0 data: [\d.e+-]+; diff: [\d.e+-]+"]:
        assert re.search(pattern, text), pattern
    assert "[Backward] Layer ip, bottom blob x" not in text  # x needs no gradient
    m = re.search(r"\[Update\] Layer ip, param 0 data: ([\d.e+-]+);", text)
    assert float(m.group(1)) == pytest.approx(np.abs(w.data).mean(), rel=1e-5)


def test_weights_field_loads_models_into_train_and_test_nets(tmp_path):
    s = make_solver('base_lr: 0.1 lr_policy: "fixed"')
    s.net.params["ip"][0].data[...] = 0.25
    s.net.save(str(tmp_path / "w.caffemodel"))
    t = make_solver('base_lr: 0.1 lr_policy: "fixed" test_iter: 1 test_interval: 5 weights: "%s"'
                    % (tmp_path / "w.caffemodel"))
    assert np.all(t.net.params["ip"][0].data == 0.25)
    assert np.all(t.test_nets[0].params["ip"][0].data == 0.25)


class _Tty(object):
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def isatty(self):
        return True


def test_progress_bar_only_on_a_tty():
    from caffepy.log import setup as setup_log
    tty = _Tty()
    setup_log(stream=tty, minloglevel=0)
    try:
        s = make_solver('base_lr: 0.1 lr_policy: "fixed" display: 1')
        s.step(2)
    finally:
        reset_log()
    out = "".join(tty.parts)
    # a tqdm bar: "train <iter>/<max_iter> ... [elapsed<ETA, rate], loss L, lr R"
    assert "\rtrain 0/2 " in out and re.search(r"\rtrain 1/2 .*iter/s\], loss \S+, lr 0.1", out)
    # every log line starts on a line the bar was lifted off (carriage return, blanks, return)
    assert re.search(r"\r +\rI\d{4} ", out)
    assert out.rstrip(" ").endswith("\r")          # closed: the bar is erased at the end


def test_debug_lines_name_the_blobs_of_layers_that_share_a_name(logs):
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    from caffepy.solvers import debug
    net = Net('input: "x" input_shape { dim: 2 dim: 3 }\n'
              'layer { name: "r" type: "ReLU" bottom: "x" top: "a" }\n'
              'layer { name: "r" type: "Scale" bottom: "a" top: "b" }\n', caffe_pb2.TRAIN)
    for i in range(len(net.layers)):
        debug.forward_debug(net, i)
    text = logs.getvalue()
    assert "[Forward] Layer r, top blob a data:" in text
    assert "[Forward] Layer r, top blob b data:" in text
    net.blobs["x"].data[...] = 1.0
    net.params["r"][0].data[...] = np.inf
    assert debug.locate_nonfinite(net) == (2, "b")
