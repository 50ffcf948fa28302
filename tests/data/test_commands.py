"""convert_imageset / compute_image_mean / convert_mnist / prepare_mnist against Caffe's layouts."""
import gzip
import hashlib
import io
import os

import numpy as np
import pytest

from caffepy.cli import main
from caffepy.data.datum import read_mean
from caffepy.data.db import open_db
from caffepy.data.idx import write_idx
from caffepy.data.image import encode_image

RNG = np.random.default_rng(11)


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def caffe_raw_datum_bytes(chw, label):
    """Datum as Caffe's CVMatToDatum + set_label serialises it: fields 1,2,3,4,5,7 in order."""
    c, h, w = chw.shape
    data = chw.tobytes()
    return (b"\x08" + varint(c) + b"\x10" + varint(h) + b"\x18" + varint(w)
            + b"\x22" + varint(len(data)) + data + b"\x28" + varint(label) + b"\x38\x00")


def read_all(path, backend="lmdb"):
    with open_db(path, backend, "r") as db:
        return list(db.items())


@pytest.fixture
def images(tmp_path):
    a = RNG.integers(0, 256, (2, 3, 3), dtype=np.uint8)   # H x W x BGR
    b = RNG.integers(0, 256, (2, 3, 3), dtype=np.uint8)
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a b.png").write_bytes(encode_image(a, "png"))
    (tmp_path / "imgs" / "c.png").write_bytes(encode_image(b, "png"))
    (tmp_path / "list.txt").write_text("a b.png 1\nc.png 300\nmissing.png 2\n")
    return tmp_path, a, b


def test_convert_imageset_bytes_match_caffe(images):
    tmp, a, b = images
    db = str(tmp / "out_lmdb")
    assert main(["convert_imageset", str(tmp / "imgs") + "/", str(tmp / "list.txt"), db]) == 0
    got = read_all(db)
    assert got == [(b"00000000_a b.png", caffe_raw_datum_bytes(a.transpose(2, 0, 1), 1)),
                   (b"00000001_c.png", caffe_raw_datum_bytes(b.transpose(2, 0, 1), 300))]


def test_convert_imageset_gray_resize_encoded_shuffle(images):
    tmp, a, b = images
    root, lst = str(tmp / "imgs") + "/", str(tmp / "list.txt")
    assert main(["convert_imageset", "-gray", "--resize_height=4", "--resize_width", "5",
                 root, lst, str(tmp / "g")]) == 0
    from caffepy.proto import caffe_pb2
    d = caffe_pb2.Datum.FromString(read_all(str(tmp / "g"))[0][1])
    assert (d.channels, d.height, d.width) == (1, 4, 5)
    assert main(["convert_imageset", "--encoded", root, lst, str(tmp / "e")]) == 0
    png = (tmp / "imgs" / "a b.png").read_bytes()
    assert read_all(str(tmp / "e"))[0] == (
        b"00000000_a b.png", b"\x22" + varint(len(png)) + png + b"\x28\x01\x38\x01")
    assert main(["convert_imageset", "--encode_type=jpg", root, lst, str(tmp / "j")]) == 0
    d = caffe_pb2.Datum.FromString(read_all(str(tmp / "j"))[1][1])
    assert d.encoded and d.data[:2] == b"\xff\xd8" and d.label == 300
    assert main(["convert_imageset", "--shuffle", root, lst, str(tmp / "s")]) == 0
    keys = sorted(k.split(b"_", 1)[1] for k, _ in read_all(str(tmp / "s")))
    assert keys == [b"a b.png", b"c.png"]
    assert main(["convert_imageset", root, lst, str(tmp / "s")]) == 1       # exists: refused


def test_convert_imageset_check_size(images, capsys):
    tmp, a, b = images
    (tmp / "imgs" / "big.png").write_bytes(encode_image(np.zeros((5, 5, 3), np.uint8), "png"))
    (tmp / "list2.txt").write_text("c.png 0\nbig.png 1\n")
    rc = main(["convert_imageset", "--check_size", str(tmp / "imgs") + "/", str(tmp / "list2.txt"),
               str(tmp / "x")])
    assert rc == 1 and "incorrect data field size" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["lmdb", "leveldb"])
def test_compute_image_mean(images, backend, capsys):
    if backend == "leveldb":
        pytest.importorskip("plyvel")
    tmp, a, b = images
    db = str(tmp / "db")
    main(["convert_imageset", "--backend", backend, str(tmp / "imgs") + "/", str(tmp / "list.txt"), db])
    out = str(tmp / "mean.binaryproto")
    assert main(["compute_image_mean", "-backend", backend, db, out]) == 0
    expected = (a.astype(np.float64) + b).transpose(2, 0, 1) / 2
    np.testing.assert_allclose(read_mean(out), expected, rtol=1e-6)
    assert "mean_value channel [2]" in capsys.readouterr().out


def write_mnist(d, n=5, rows=28, cols=28, gz=False):
    os.makedirs(d, exist_ok=True)
    images = RNG.integers(0, 256, (n, rows, cols), dtype=np.uint8)
    labels = RNG.integers(0, 10, n, dtype=np.uint8)
    suffix = ".gz" if gz else ""
    write_idx(images, os.path.join(d, "imgs" + suffix))
    write_idx(labels, os.path.join(d, "labels" + suffix))
    return images, labels


def test_convert_mnist_bytes_match_caffe(tmp_path):
    images, labels = write_mnist(str(tmp_path), n=3, gz=True)
    db = str(tmp_path / "db")
    assert main(["convert_mnist", str(tmp_path / "imgs.gz"), str(tmp_path / "labels.gz"), db]) == 0
    got = read_all(db)
    expected = [(b"%08d" % i, b"\x08\x01\x10\x1c\x18\x1c\x22\x90\x06" + images[i].tobytes()
                 + b"\x28" + bytes([labels[i]])) for i in range(3)]
    assert got == expected


def test_prepare_mnist_from_a_folder_and_by_download(tmp_path, monkeypatch):
    from caffepy.commands import prepare_mnist as pm
    src = tmp_path / "mnist"
    for split, n in (("train", 4), ("t10k", 3)):
        write_idx(RNG.integers(0, 256, (n, 28, 28), dtype=np.uint8), str(src / ("%s-images-idx3-ubyte" % split)))
        write_idx(RNG.integers(0, 10, n, dtype=np.uint8), str(src / ("%s-labels-idx1-ubyte" % split)))
    out = tmp_path / "out"
    assert main(["prepare_mnist", "--mnist_dir", str(src), "--output_dir", str(out)]) == 0
    assert len(read_all(str(out / "mnist_train_lmdb"))) == 4
    assert len(read_all(str(out / "mnist_test_lmdb"))) == 3
    assert not [p for p in os.listdir(out) if ".tmp-" in p]

    # Download path: mirrors are served offline; the first one returns corrupt bytes.
    served = {}
    for name in pm.FILES:
        raw = (src / name).read_bytes()
        served[name + ".gz"] = gzip.compress(raw, mtime=0)
    monkeypatch.setattr(pm, "FILES", {k: (hashlib.md5(served[k + ".gz"]).hexdigest(), v[1])
                                      for k, v in pm.FILES.items()})
    calls = []

    def fake_urlopen(url, timeout=None):
        calls.append(url)
        name = url.rsplit("/", 1)[1]
        return io.BytesIO(b"corrupt" if url.startswith("https://bad/") else served[name])

    monkeypatch.setattr(pm.urllib.request, "urlopen", fake_urlopen)
    paths = pm.prepare(None, str(tmp_path / "dl"), log=lambda m: None,
                       mirrors=("https://bad/", "https://good/"))
    assert len(read_all(paths[0])) == 4 and any(u.startswith("https://good/") for u in calls)
    from caffepy.errors import CaffeError
    with pytest.raises(CaffeError, match="cannot download .* MNIST_DIR"):
        pm.download("train-images-idx3-ubyte", str(tmp_path / "dl2"), mirrors=("https://bad/",))


def test_extract_features(tmp_path):
    net_mod = pytest.importorskip("caffepy.net")
    from caffepy.proto import caffe_pb2
    items = RNG.integers(0, 256, (6, 1, 2, 2), dtype=np.uint8)
    with open_db(str(tmp_path / "src"), "lmdb", "w") as db:
        from caffepy.data.datum import array_to_datum
        for i, a in enumerate(items):
            db.put("%08d" % i, array_to_datum(a, i).SerializeToString())
    proto = tmp_path / "net.prototxt"
    proto.write_text(
        'layer { name: "d" type: "Data" top: "data" top: "label" data_param { source: "%s" '
        'batch_size: 4 backend: LMDB } transform_param { scale: 0.5 } }\n'
        'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { '
        'num_output: 3 weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } } }\n'
        % (tmp_path / "src"))
    net = net_mod.Net(str(proto), phase=caffe_pb2.TEST)
    net.save(str(tmp_path / "w.caffemodel"))
    w, b = (p.data.copy() for p in net.params["ip"])
    net.layers[0].close()
    rc = main(["extract_features", str(tmp_path / "w.caffemodel"), str(proto), "data,ip",
               "%s,%s" % (tmp_path / "f_data", tmp_path / "f_ip"), "2", "lmdb", "CPU"])
    assert rc == 0
    fd, fi = read_all(str(tmp_path / "f_data")), read_all(str(tmp_path / "f_ip"))
    assert [k for k, _ in fd] == [b"%010d" % i for i in range(8)] == [k for k, _ in fi]
    for i, ((_, vd), (_, vi)) in enumerate(zip(fd, fi)):
        dd, di = caffe_pb2.Datum.FromString(vd), caffe_pb2.Datum.FromString(vi)
        x = items[i % 6].astype(np.float32) * 0.5
        assert (dd.channels, dd.height, dd.width) == (1, 2, 2) and not dd.data
        np.testing.assert_array_equal(dd.float_data, x.ravel())
        assert (di.channels, di.height, di.width) == (3, 1, 1)
        np.testing.assert_allclose(di.float_data, w @ x.ravel() + b, rtol=1e-5, atol=1e-6)
    assert main(["extract_features", str(tmp_path / "w.caffemodel"), str(proto), "nope",
                 str(tmp_path / "f_x"), "1", "lmdb"]) == 1
