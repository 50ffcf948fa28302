"""Round trips of every format the data package reads or writes."""
import numpy as np
import pytest

from caffepy.data import db as dbmod
from caffepy.data.datum import (array_to_datum, datum_to_array, encoded_datum, image_to_datum,
                                parse_datum, read_mean, write_mean)
from caffepy.data.idx import read_idx, read_mnist, write_idx
from caffepy.data.image import decode_image, encode_image, read_image_list, resize_bilinear
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2

RNG = np.random.default_rng(0)


def test_datum_uint8_and_float_round_trip():
    a = RNG.integers(0, 256, (3, 4, 5), dtype=np.uint8)
    d = parse_datum(array_to_datum(a, label=7).SerializeToString())
    assert (d.channels, d.height, d.width, d.label) == (3, 4, 5, 7)
    np.testing.assert_array_equal(datum_to_array(d), a)
    f = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    d = parse_datum(array_to_datum(f).SerializeToString())
    assert not d.data and len(d.float_data) == 24
    np.testing.assert_array_equal(datum_to_array(d), f)


def test_datum_size_mismatch_is_an_error():
    d = array_to_datum(np.zeros((1, 2, 2), np.uint8))
    d.height = 3
    with pytest.raises(CaffeError, match="expected 6"):
        datum_to_array(d)


def test_encoded_datum_decodes_to_bgr():
    bgr = RNG.integers(0, 256, (4, 6, 3), dtype=np.uint8)
    d = encoded_datum(encode_image(bgr, "png"), 3)
    np.testing.assert_array_equal(datum_to_array(d), bgr.transpose(2, 0, 1))
    gray = datum_to_array(d, color=False)
    assert gray.shape == (1, 4, 6)
    g = RNG.integers(0, 256, (5, 2, 1), dtype=np.uint8)
    png = encode_image(g, "png")
    assert datum_to_array(encoded_datum(png, 0)).shape == (1, 5, 2)          # native: stays gray
    np.testing.assert_array_equal(decode_image(png, color=True), np.repeat(g, 3, axis=2))


def test_image_to_datum_layout():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # H x W x C
    d = image_to_datum(img, 5)
    assert (d.channels, d.height, d.width, d.label, d.HasField("encoded")) == (3, 2, 3, 5, True)
    assert d.data == img.transpose(2, 0, 1).tobytes()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("gz", [False, True])
def test_idx_round_trip(tmp_path, dtype, gz):
    a = (RNG.standard_normal((3, 4, 2)) * 50).astype(dtype)
    p = tmp_path / ("a.idx" + (".gz" if gz else ""))
    write_idx(a, p)
    b = read_idx(p)
    assert b.dtype == np.dtype(dtype).newbyteorder("=") and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


def test_idx_errors(tmp_path):
    p = tmp_path / "bad"
    p.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x05abc")
    with pytest.raises(CaffeError, match="needs 5 data bytes"):
        read_idx(p)
    write_idx(np.zeros((2, 2, 2), np.uint8), tmp_path / "i")
    write_idx(np.zeros(3, np.uint8), tmp_path / "l")
    with pytest.raises(CaffeError, match="2 images but .* 3 labels"):
        read_mnist(tmp_path / "i", tmp_path / "l")
    with pytest.raises(CaffeError, match="magic"):
        read_mnist(tmp_path / "l", tmp_path / "l")


def test_mean_binaryproto_round_trip(tmp_path):
    m = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    p = tmp_path / "mean.binaryproto"
    write_mean(m, p)
    bp = caffe_pb2.BlobProto()
    bp.ParseFromString(p.read_bytes())
    assert (bp.num, bp.channels, bp.height, bp.width) == (1, 3, 5, 4)     # legacy 4-d fields
    np.testing.assert_array_equal(read_mean(p), m)
    bp2 = caffe_pb2.BlobProto()
    bp2.shape.dim.extend([1, 3, 5, 4])
    bp2.double_data.extend(m.ravel().astype(np.float64))
    p.write_bytes(bp2.SerializeToString())
    np.testing.assert_array_equal(read_mean(p), m)


def test_image_list_splits_at_last_space(tmp_path):
    p = tmp_path / "list.txt"
    p.write_text("a/b c.png 3\nplain.jpg 0\r\n\nx y z 12\n")
    assert read_image_list(p) == [("a/b c.png", 3), ("plain.jpg", 0), ("x y z", 12)]
    p.write_text("ok.png 1\nnolabel\n")
    with pytest.raises(CaffeError, match="list.txt:2"):
        read_image_list(p)


@pytest.mark.parametrize("backend", ["lmdb", "leveldb"])
def test_db_round_trip_and_cursor_wrap(tmp_path, backend):
    if backend == "leveldb":
        pytest.importorskip("plyvel")
    path = str(tmp_path / "db")
    items = {("%08d" % i).encode(): bytes([i]) * (i + 1) for i in range(25)}
    with dbmod.open_db(path, backend, "w", commit_every=7) as db:
        for k in reversed(sorted(items)):
            db.put(k, items[k])
    assert dbmod.detect_backend(path) == backend
    with dbmod.open_db(path, backend, "r") as db:
        assert len(db) == 25
        assert list(db.items()) == sorted(items.items())
        cur = db.cursor()
        for _ in range(25):
            cur.next()
        assert not cur.valid
        cur.seek_to_first()
        assert cur.key == b"00000000"
    with pytest.raises(CaffeError, match="already exists"):
        dbmod.open_db(path, backend, "w")


def test_db_errors(tmp_path):
    with pytest.raises(CaffeError, match="no such lmdb"):
        dbmod.open_db(str(tmp_path / "missing"), "lmdb", "r")
    with dbmod.open_db(str(tmp_path / "l"), "lmdb", "w") as db:
        db.put("k", b"v")
    with pytest.raises(CaffeError, match="backend: LMDB"):
        dbmod.open_db(str(tmp_path / "l"), caffe_pb2.DataParameter.LEVELDB, "r")
    with pytest.raises(CaffeError, match="unknown db backend"):
        dbmod.backend_name("rocksdb")


def test_lmdb_map_grows(tmp_path):
    with dbmod.open_db(str(tmp_path / "big"), "lmdb", "w", commit_every=10) as db:
        db.env.set_mapsize(1 << 16)
        for i in range(40):
            db.put("%08d" % i, bytes(8192))
    with dbmod.open_db(str(tmp_path / "big"), "lmdb", "r") as db:
        assert len(db) == 40


def test_resize_bilinear_matches_half_pixel_reference():
    img = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(resize_bilinear(img, 5, 7), img)
    out = resize_bilinear(img, 9, 4)
    ref = np.empty((9, 4, 3))
    for oy in range(9):
        for ox in range(4):
            fy = min(max((oy + 0.5) * 5 / 9 - 0.5, 0), 4)
            fx = min(max((ox + 0.5) * 7 / 4 - 0.5, 0), 6)
            y0, x0 = int(fy), int(fx)
            y1, x1 = min(y0 + 1, 4), min(x0 + 1, 6)
            wy, wx = fy - y0, fx - x0
            ref[oy, ox] = ((1 - wy) * ((1 - wx) * img[y0, x0] + wx * img[y0, x1])
                           + wy * ((1 - wx) * img[y1, x0] + wx * img[y1, x1]))
    assert np.abs(out.astype(float) - ref).max() <= 1.0
    half = resize_bilinear(img[:4, :6], 2, 3).astype(float)       # exact 2x: mean of 2x2 blocks
    blocks = img[:4, :6].astype(float).reshape(2, 2, 3, 2, 3).mean(axis=(1, 3))
    assert np.abs(half - blocks).max() <= 0.5 + 1e-9


def test_leveldb_without_plyvel_says_how_to_fix(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "plyvel", None)
    (tmp_path / "ldb").mkdir()
    with pytest.raises(CaffeError, match="pip install plyvel"):
        dbmod.open_db(str(tmp_path / "ldb"), "leveldb", "r")
