"""A solver file given to ``summary`` / ``draw`` stands for the net it builds in that phase."""
import argparse
import json

import pytest

from caffepy.commands import draw as draw_cmd
from caffepy.commands import summary as summary_cmd
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.proto.solver_nets import is_solver_text, solver_net, top_level_keys

LAYERS = '''
  layer { name: "train_in" type: "Input" top: "data" include { phase: TRAIN }
          input_param { shape { dim: 4 dim: 1 dim: 6 dim: 6 } } }
  layer { name: "test_small" type: "Input" top: "data"
          include { phase: TEST stage: "small" } input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } } }
  layer { name: "test_big" type: "Input" top: "data"
          include { phase: TEST stage: "big" } input_param { shape { dim: 8 dim: 1 dim: 6 dim: 6 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"   # a comment { with a brace
          inner_product_param { num_output: 3 } }
'''

CONSOLIDATED = '''# net: "not a key" in a comment
base_lr: 0.01  lr_policy: "fixed"  max_iter: 10
test_iter: 1 test_iter: 1 test_interval: 5
test_state: { stage: "big" }
test_state: { stage: "small" }
train_state: { level: 0 }
net_param {
  name: "inline"
%s}
''' % LAYERS


def _summary(path, *extra):
    parser = argparse.ArgumentParser()
    summary_cmd.add_arguments(parser)
    return summary_cmd.run(parser.parse_args([str(path)] + list(extra)))


def test_top_level_keys_skip_comments_strings_and_blocks():
    assert top_level_keys(CONSOLIDATED) == {"base_lr", "lr_policy", "max_iter", "test_iter",
                                            "test_interval", "test_state", "train_state",
                                            "net_param"}
    assert is_solver_text(CONSOLIDATED)
    assert not is_solver_text('name: "n"' + LAYERS)
    assert not is_solver_text('input: "data" input_dim: 1')


def test_inline_net_in_each_phase_with_the_solvers_state(tmp_path):
    path = tmp_path / "solver.prototxt"
    path.write_text(CONSOLIDATED)
    net, source, what = solver_net(str(path), caffe_pb2.TEST)
    assert source == str(path) and net.name == "inline"
    assert list(net.state.stage) == ["big"] and net.state.phase == caffe_pb2.TEST
    assert "TEST net, net_param, stage big" in what
    net, _, what = solver_net(str(path), caffe_pb2.TRAIN)
    assert net.state.phase == caffe_pb2.TRAIN and not len(net.state.stage)


def test_summary_of_a_consolidated_solver(tmp_path, capsys):
    path = tmp_path / "solver.prototxt"
    path.write_text(CONSOLIDATED)
    assert _summary(path, "--strict") == 0
    out = capsys.readouterr().out
    assert "8x3" in out and "2x3" not in out          # test_state[0]: the "big" stage's input
    assert _summary(path, "--strict", "--phase", "TRAIN") == 0
    assert "4x3" in capsys.readouterr().out


def test_net_path_found_under_the_solvers_parents(tmp_path, capsys, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.prototxt").write_text('name: "file"' + LAYERS)
    solver = tmp_path / "models" / "sub"
    solver.mkdir()
    solver = solver / "solver.prototxt"
    solver.write_text('net: "models/net.prototxt"\nbase_lr: 0.1\ntest_state { stage: "small" }\n')
    monkeypatch.chdir(tmp_path / "models")                # the path is not relative to here
    net, source, _ = solver_net(str(solver), caffe_pb2.TEST)
    assert net.name == "file" and source == str(tmp_path / "models" / "net.prototxt")
    assert _summary(solver, "--strict") == 0
    assert "2x3" in capsys.readouterr().out


def test_missing_net_file_and_no_net_are_one_line_errors(tmp_path):
    solver = tmp_path / "solver.prototxt"
    solver.write_text('net: "nowhere/net.prototxt"\nbase_lr: 0.1\n')
    with pytest.raises(CaffeError, match="net file 'nowhere/net.prototxt' exists neither"):
        solver_net(str(solver))
    solver.write_text('base_lr: 0.1\nmax_iter: 3\n')
    with pytest.raises(CaffeError, match="names no net"):
        solver_net(str(solver))


def test_draw_a_solver_file(tmp_path):
    path = tmp_path / "solver.prototxt"
    path.write_text(CONSOLIDATED)
    parser = argparse.ArgumentParser()
    draw_cmd.add_arguments(parser)
    out = tmp_path / "net.json"
    assert draw_cmd.run(parser.parse_args([str(path), "--json", str(out)])) == 0
    names = json.dumps(json.loads(out.read_text()))
    assert "test_big" in names and "ip" in names
