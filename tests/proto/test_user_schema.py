"""A fork's own caffe.proto (--proto, CAFFEPY_PROTO, caffepy.load_schema) merged with caffepy's."""
import logging
import os
import sys

import pytest

import caffepy
from caffepy.cli import main
from caffepy.errors import ProtoError
from caffepy.layers.base import fork_param
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io, user_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A fork's schema that defines only the messages it changes (protoc compiles it on its own).
FORK = """syntax = "proto2";
package caffe;
message NetParameter { optional string fork_note = 9000; }
message LayerParameter { optional MyForkParameter my_fork_param = 9999; }
message MyForkParameter {
  enum Mode { PLAIN = 0; FANCY = 1; }
  optional float alpha = 1 [default = 0.5];
  optional Mode mode = 2;
}
message ConvolutionParameter {
  optional uint32 num_output = 1;       // caffepy's own field: caffepy's definition wins
  optional int32 pad_l = 3000;
  optional int32 stripe = 4;            // number 4 is caffepy's bias_term: renumbered
  optional string pad = 3001;           // caffepy's pad is repeated uint32: a clash of type
}
message PoolingParameter {
  enum PoolMethod { MAX = 0; AVE = 1; STOCHASTIC = 2; FORK_POOL = 7; }   // 7 may be caffepy's
}
message SolverParameter { optional float lr_boost = 9001 [default = 1]; }
"""

NET = """name: "forked"
fork_note: "from the fork"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 1 dim: 2 dim: 5 dim: 5 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 3 kernel_size: 3 pad_l: 1 stripe: 4
    weight_filler { type: "gaussian" std: 0.1 } }
  my_fork_param { alpha: 0.25 mode: FANCY }
}
"""


@pytest.fixture(autouse=True)
def _no_schema(monkeypatch):
    monkeypatch.delenv(user_schema.ENV, raising=False)
    user_schema.reset()
    yield
    user_schema.reset()


@pytest.fixture
def fork(tmp_path):
    path = tmp_path / "fork" / "caffe.proto"
    path.parent.mkdir()
    path.write_text(FORK)
    return str(path)


@pytest.fixture
def net_file(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    return str(path)


def test_fork_fields_are_an_error_without_the_schema(net_file):
    with pytest.raises(ProtoError, match='no field named "fork_note" in NetParameter'):
        io.read_net(net_file)


def test_a_field_caffepy_knows_only_from_forks_is_accepted_with_the_fork_schema(fork, tmp_path):
    path = tmp_path / "pad_l.prototxt"
    path.write_text('layer { name: "c" type: "Convolution" bottom: "x" top: "y"\n'
                    '  convolution_param { num_output: 1 kernel_size: 1 pad_l: 2 } }\n')
    with pytest.raises(ProtoError, match="pad_l"):     # harvested (or unknown) without the fork
        io.read_net(str(path))
    user_schema.load_schema(fork)
    assert "ConvolutionParameter.pad_l" in user_schema.active().defines
    net = io.read_net(str(path))
    assert user_schema.fork_view(net.layer[0]).convolution_param.pad_l == 2


def test_load_schema_parses_the_fork_net(fork, net_file):
    assert caffepy.load_schema(fork) is user_schema.active()
    net = io.read_net(net_file)
    assert isinstance(net, caffe_pb2.NetParameter)
    conv = net.layer[1]
    assert conv.convolution_param.num_output == 3 and conv.convolution_param.kernel_size == [3]
    assert conv.convolution_param.weight_filler.std == pytest.approx(0.1)
    assert not conv.convolution_param.HasField("bias_term")      # stripe does not land on it
    view = user_schema.fork_view(conv)
    assert view.my_fork_param.alpha == 0.25 and view.my_fork_param.mode == 1
    assert view.convolution_param.pad_l == 1 and view.convolution_param.stripe == 4
    assert user_schema.fork_view(net).fork_note == "from the fork"


def test_fork_field_reaches_a_layer(fork, net_file):
    user_schema.load_schema(fork)
    net = Net(net_file, caffepy.TEST)
    assert net.blobs["conv1"].data.shape == (1, 3, 3, 3)
    conv = [l for l in net.layers if l.layer_param.name == "conv1"][0]
    assert user_schema.fork_view(conv.layer_param).my_fork_param.alpha == 0.25
    assert fork_param(conv.layer_param, "my_fork_param").mode == 1
    data = [l for l in net.layers if l.layer_param.name == "data"][0]
    assert fork_param(data.layer_param, "my_fork_param").alpha == 0.5     # the fork's default
    user_schema.reset()
    assert fork_param(conv.layer_param, "my_fork_param") is None
    with pytest.raises(ProtoError, match="needs a fork's schema: pass --proto"):
        user_schema.fork_view(conv.layer_param)


def test_renumbering_and_type_clash_are_noted(fork, net_file, caplog):
    with caplog.at_level(logging.INFO, logger="caffepy.proto.user_schema"):
        schema = user_schema.load_schema(fork)
    assert "ConvolutionParameter.stripe 4 -> %d" % user_schema.RENUMBER_BASE in schema.renumbered
    assert schema.clashes == ["ConvolutionParameter.pad (caffepy: repeated uint32; fork: string)"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "stripe 4 -> " in lines[0] and "pad (caffepy" in lines[1]
    assert schema.ConvolutionParameter.DESCRIPTOR.fields_by_name["num_output"].number == 1
    text = io.to_text(io.read_net(net_file))          # written text keeps the fork's names
    assert "stripe: 4" in text and "pad_l: 1" in text and 'fork_note: "from the fork"' in text


def test_proto_flag_on_the_command_line(fork, net_file, capsys):
    assert main(["summary", "--strict", net_file]) == 1
    assert 'no field named "fork_note"' in capsys.readouterr().err
    assert main(["summary", net_file, "--proto", fork]) == 0
    assert "conv1" in capsys.readouterr().out
    assert main(["-proto=" + fork, "summary", net_file]) == 0
    assert user_schema.active() is None                  # the command's schema only
    solver = os.path.join(os.path.dirname(net_file), "solver.prototxt")
    with open(solver, "w") as f:
        f.write('net: "%s"\nbase_lr: 0.1\nlr_boost: 2\n' % net_file)
    with user_schema.using(fork):
        sp = io.read_solver(solver)
        assert sp.base_lr == pytest.approx(0.1)
        assert user_schema.fork_view(sp).lr_boost == 2


def test_environment_variable(fork, net_file, monkeypatch):
    monkeypatch.setenv(user_schema.ENV, fork)
    assert Net(net_file, caffepy.TEST).blobs["conv1"].data.shape == (1, 3, 3, 3)
    monkeypatch.setenv(user_schema.ENV, fork + ".missing")
    with pytest.raises(ProtoError, match=r"no such file .*\(CAFFEPY_PROTO\)$"):
        io.read_net(net_file)
    monkeypatch.delenv(user_schema.ENV)
    with pytest.raises(ProtoError, match="no field named"):
        io.read_net(net_file)


def test_loading_twice_is_idempotent(fork, net_file):
    first = user_schema.load_schema(fork)
    assert user_schema.load_schema(fork) is first
    net = io.read_net(net_file)
    assert io.read_net(net_file) == net
    with open(fork, "a") as f:
        f.write("message MoreParameter { optional int32 x = 1; }\n")
    os.utime(fork, ns=(0, 1))                            # an edited file is compiled again
    assert user_schema.load_schema(fork) is not first


def test_fork_enum_value_in_a_caffepy_field_stays_an_error(fork, tmp_path):
    user_schema.load_schema(fork)
    path = tmp_path / "pool.prototxt"
    path.write_text('layer { name: "pool1" type: "Pooling" bottom: "x" top: "y"\n'
                    '  pooling_param { pool: FORK_POOL kernel_size: 2 } }\n')
    with pytest.raises(ProtoError) as e:
        io.read_net(str(path))
    assert str(e.value).startswith("%s:2:" % path)
    assert "FORK_POOL" in str(e.value) and "(layer 'pool1')" in str(e.value)


def test_binary_net_keeps_fork_fields_at_their_numbers(fork, net_file):
    user_schema.load_schema(fork)
    data = io.read_net(net_file).SerializeToString()
    net = io.read_net(data)                                # caffepy's own classes
    assert net.layer[1].convolution_param.num_output == 3
    assert user_schema.fork_view(net.layer[1]).my_fork_param.alpha == 0.25


def test_whole_fork_file(tmp_path):
    """A real fork's file: caffepy's whole schema with the fork's additions."""
    with open(os.path.join(ROOT, "proto", "caffe.proto")) as f:
        text = f.read()
    text = text.replace("message ReLUParameter {",
                        "message ReLUParameter {\n  optional float fork_cap = 7001;", 1)
    path = tmp_path / "caffe.proto"
    path.write_text(text)
    schema = user_schema.load_schema(str(path))
    assert schema.renumbered == [] and schema.clashes == []
    net = io.read_net('layer { name: "r" type: "ReLU" bottom: "x" top: "x"\n'
                      '  relu_param { negative_slope: 0.5 fork_cap: 6 } }')
    assert net.layer[0].relu_param.negative_slope == 0.5
    assert user_schema.fork_view(net.layer[0]).relu_param.fork_cap == 6


@pytest.mark.parametrize("text,expected", [
    ('syntax = "proto2";\npackage caffe;\nmessage NetParameter { optional strin x = 1 }\n',
     r'^.*caffe\.proto:3:\d+: Expected ";"\.$'),
    ('syntax = "proto2";\npackage notcaffe;\nmessage NetParameter {}\n',
     r"package is 'notcaffe', not 'caffe': not a Caffe schema$"),
    ('syntax = "proto2";\npackage caffe;\nmessage LayerParameter {}\n',
     r"defines no message NetParameter: not a Caffe schema$"),
])
def test_one_line_errors(tmp_path, text, expected):
    path = tmp_path / "caffe.proto"
    path.write_text(text)
    with pytest.raises(ProtoError, match=expected) as e:
        user_schema.load_schema(str(path))
    assert "\n" not in str(e.value) and str(e.value).startswith(str(path))
    assert user_schema.active() is None


def test_missing_file_and_missing_protoc(tmp_path, fork, monkeypatch, capsys):
    missing = str(tmp_path / "nope.proto")
    with pytest.raises(ProtoError, match=r"nope\.proto: no such file"):
        user_schema.load_schema(missing)
    assert main(["summary", "x.prototxt", "--proto", missing]) == 1
    assert capsys.readouterr().err.strip().endswith("(--proto)")
    monkeypatch.setitem(sys.modules, "grpc_tools", None)
    with pytest.raises(ProtoError, match=r"needs grpcio-tools: pip install 'caffepy\[proto\]'"):
        user_schema.load_schema(fork)
