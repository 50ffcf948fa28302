"""A damaged LMDB record, a truncated HDF5 dataset, a broken image in a list: one line naming the
source and the record (no traceback), or, with CAFFEPY_SKIP_BAD_RECORDS=1 / --skip_bad_records,
one WARNING per bad record and training goes on."""
import os

import numpy as np
import pytest

from caffepy import cli
from caffepy.log import teardown as teardown_log

SOLVER = ('net: "net.prototxt" base_lr: 0.01 lr_policy: "fixed" max_iter: 6 display: 0 '
          'snapshot_after_train: false random_seed: 1 solver_mode: CPU\n')
TAIL = """
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def _train(tmp_path, net, capsys, monkeypatch, *flags):
    (tmp_path / "net.prototxt").write_text(net + TAIL)
    (tmp_path / "solver.prototxt").write_text(SOLVER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAFFEPY_DEBUG", raising=False)
    try:
        rc = cli.main(["train", "--solver", "solver.prototxt"] + list(flags))
        return rc, capsys.readouterr().err
    finally:
        teardown_log()
        os.environ.pop("CAFFEPY_SKIP_BAD_RECORDS", None)


def _lmdb(tmp_path):
    pytest.importorskip("lmdb")
    from caffepy.data.datum import array_to_datum
    from caffepy.data.db import LMDB, open_db
    path = str(tmp_path / "db")
    with open_db(path, LMDB, "w") as db:
        for i in range(6):
            value = b"\xff\x07garbage, not a Datum" if i == 3 else \
                array_to_datum(np.full((1, 2, 2), i, np.uint8), label=i % 2).SerializeToString()
            db.put(b"%08d" % i, value)
    return path


def _data_layer(path):
    return ('layer { name: "data" type: "Data" top: "data" top: "label" '
            'data_param { source: "%s" backend: LMDB batch_size: 2 } }' % path)


def test_bad_lmdb_record_stops_with_one_line(tmp_path, capsys, monkeypatch):
    rc, err = _train(tmp_path, _data_layer(_lmdb(tmp_path)), capsys, monkeypatch)
    assert rc == 1 and "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "bad record" in lines[0] and "key b'00000003'" in lines[0], err
    assert str(tmp_path / "db") in lines[0] and "CAFFEPY_SKIP_BAD_RECORDS" in lines[0]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_bad_lmdb_record_skipped_with_one_warning(how, tmp_path, capsys, monkeypatch):
    flags = ["--skip_bad_records"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("CAFFEPY_SKIP_BAD_RECORDS", "1")
    rc, err = _train(tmp_path, _data_layer(_lmdb(tmp_path)), capsys, monkeypatch, *flags)
    assert rc == 0, err[-2000:]
    warnings = [line for line in err.splitlines() if "skipping bad record" in line]
    assert len(warnings) == 1 and "key b'00000003'" in warnings[0]      # seen on each pass


def test_truncated_hdf5_dataset_stops_with_one_line(tmp_path, capsys, monkeypatch):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "d.h5"
    with h5py.File(str(path), "w") as f:
        f.create_dataset("data", data=np.ones((64, 3), np.float32))
        f.create_dataset("label", data=np.zeros(64, np.float32))
    raw = path.read_bytes()
    data_at = raw.find(np.ones(64 * 3, np.float32).tobytes()[:64])
    path.write_bytes(raw[:data_at + 100])            # cut inside the data's bytes
    (tmp_path / "list.txt").write_text("%s\n" % path)
    net = ('layer { name: "data" type: "HDF5Data" top: "data" top: "label" '
           'hdf5_data_param { source: "list.txt" batch_size: 2 } }')
    rc, err = _train(tmp_path, net, capsys, monkeypatch)
    assert rc == 1 and "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and str(path) in lines[0], err


def _image_list(tmp_path):
    from caffepy.data.image import encode_image
    for i in range(4):
        data = encode_image(np.full((3, 3, 3), 40 * i, np.uint8), "png")
        if i == 2:
            data = data[:20]                         # a truncated PNG
        (tmp_path / ("im%d.png" % i)).write_bytes(data)
    (tmp_path / "images.txt").write_text("".join("im%d.png %d\n" % (i, i % 2) for i in range(4)))
    return ('layer { name: "data" type: "ImageData" top: "data" top: "label" '
            'image_data_param { source: "images.txt" batch_size: 2 root_folder: "%s/" } }' % tmp_path)


def test_broken_image_stops_with_one_line(tmp_path, capsys, monkeypatch):
    rc, err = _train(tmp_path, _image_list(tmp_path), capsys, monkeypatch)
    assert rc == 1 and "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "images.txt line 3" in lines[0] and "im2.png" in lines[0], err


def test_broken_image_skipped_with_one_warning(tmp_path, capsys, monkeypatch):
    rc, err = _train(tmp_path, _image_list(tmp_path), capsys, monkeypatch, "--skip_bad_records")
    assert rc == 0, err[-2000:]
    warnings = [line for line in err.splitlines() if "skipping bad record" in line]
    assert len(warnings) == 1 and "images.txt line 3" in warnings[0]
