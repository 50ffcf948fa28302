"""The upgrade tools: caffepy upgrade_net_proto_text / _binary, upgrade_solver_proto_text."""
from caffepy.cli import main
from caffepy.proto import caffe_pb2, io
from tests.proto.test_upgrade import V0_NET, V1_NET


def test_upgrade_net_proto_text(tmp_path, capsys):
    src, out = tmp_path / "old.prototxt", tmp_path / "new.prototxt"
    src.write_text(V0_NET)
    assert main(["upgrade_net_proto_text", str(src), str(out)]) == 0
    assert "upgraded" in capsys.readouterr().out
    new = io.read_text(out, caffe_pb2.NetParameter())
    assert [l.type for l in new.layer] == ["Input", "Convolution", "Pooling", "Dropout"]
    assert new == io.read_net(V0_NET)
    assert main(["upgrade_net_proto_text", str(out), str(tmp_path / "again.prototxt")]) == 0
    assert "already in the latest" in capsys.readouterr().err


def test_upgrade_net_proto_binary(tmp_path):
    src, out = tmp_path / "old.caffemodel", tmp_path / "new.caffemodel"
    old = io.read_net(V1_NET, upgrade=False)
    old.layers[1].blobs.add(data=[1.0, 2.0], shape=caffe_pb2.BlobShape(dim=[2]))
    io.write_binary(old, src)
    assert main(["upgrade_net_proto_binary", str(src), str(out)]) == 0
    new = io.read_binary(out, caffe_pb2.NetParameter())
    assert not new.layers and new.layer[1].type == "InnerProduct"
    assert list(new.layer[1].blobs[0].data) == [1.0, 2.0]


def test_upgrade_solver_proto_text(tmp_path):
    src, out = tmp_path / "solver.prototxt", tmp_path / "new.prototxt"
    src.write_text('net: "n.prototxt"\nbase_lr: 0.01\nsolver_type: NESTEROV\n')
    assert main(["upgrade_solver_proto_text", str(src), str(out)]) == 0
    new = io.read_text(out, caffe_pb2.SolverParameter())
    assert new.type == "Nesterov" and not new.HasField("solver_type") and new.net == "n.prototxt"


def test_bad_input_is_one_line_error(tmp_path, capsys):
    src = tmp_path / "bad.prototxt"
    src.write_text("layer { nme: 1 }\n")
    assert main(["upgrade_net_proto_text", str(src), str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and 'no field named "nme" in LayerParameter' in err
    assert not (tmp_path / "o").exists()


def test_fork_fields_are_carried_with_one_warning(tmp_path, caplog):
    # the tools compute nothing: a harvested fork's V1 type value and DataParameter field are
    # read for the structure (one WARNING) and written out, the type as the fork names it
    src, out = tmp_path / "old.prototxt", tmp_path / "new.prototxt"
    src.write_text('layers { name: "data" type: COMPACT_DATA top: "data" top: "label" '
                   'data_param { source: "db" batch_size: 4 data_filename: "x.dat" } }\n'
                   'layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip" '
                   'inner_product_param { num_output: 3 } }\n')
    assert main(["upgrade_net_proto_text", str(src), str(out)]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "known only from Caffe forks" in warned[0]
    assert "COMPACT_DATA" in warned[0] and "data_filename" in warned[0]
    text = out.read_text()
    assert 'type: "CompactData"' in text and 'data_filename: "x.dat"' in text
    assert 'type: "InnerProduct"' in text
