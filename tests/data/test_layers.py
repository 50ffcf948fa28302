"""Data, ImageData, MemoryData, HDF5Data, HDF5Output and WindowData layers; the prefetch thread."""
import gc
import os
import threading
import time

import numpy as np
import pytest

from caffepy.data.datum import array_to_datum, encoded_datum
from caffepy.data.db import open_db
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer

RNG = np.random.default_rng(7)


def write_db(path, datums, backend="lmdb"):
    with open_db(str(path), backend, "w") as db:
        for i, d in enumerate(datums):
            db.put("%08d" % i, d.SerializeToString())
    return str(path)


def setup(text, ntop=2, phase=caffe_pb2.TRAIN, dtype=np.float32):
    layer = make_layer(text, dtype=dtype, phase=phase)
    top = make_blobs(ntop, dtype)
    layer.setup([], top)
    return layer, top


def data_layer(path, batch, extra="", backend="LMDB", ntop=2, phase=caffe_pb2.TRAIN):
    return setup('type: "Data" data_param { source: "%s" batch_size: %d backend: %s %s }'
                 % (path, batch, backend, extra), ntop, phase)


@pytest.mark.parametrize("backend", ["lmdb", "leveldb"])
def test_data_layer_reads_in_key_order_and_wraps(tmp_path, backend):
    if backend == "leveldb":
        pytest.importorskip("plyvel")
    items = RNG.integers(0, 256, (7, 2, 3, 4), dtype=np.uint8)
    path = write_db(tmp_path / "db", [array_to_datum(a, i) for i, a in enumerate(items)], backend)
    layer, top = data_layer(path, 3, backend=backend.upper())
    assert top[0].shape == (3, 2, 3, 4) and top[1].shape == (3,)
    seen = []
    for _ in range(5):
        layer.forward([], top)
        seen += list(top[1].data.astype(int))
        for j, lab in enumerate(top[1].data.astype(int)):
            np.testing.assert_array_equal(top[0].data[j], items[lab])
    assert seen == [i % 7 for i in range(15)]
    layer.close()


def test_data_layer_transform_float_and_encoded(tmp_path):
    bgr = RNG.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    chw = bgr.transpose(2, 0, 1)
    datums = [array_to_datum(chw, 0), array_to_datum(chw.astype(np.float32), 1),
              encoded_datum(encode_image(bgr, "png"), 2)]
    path = write_db(tmp_path / "db", datums)
    layer, top = setup('type: "Data" data_param { source: "%s" batch_size: 3 backend: LMDB } '
                       'transform_param { scale: 0.5 mean_value: 1 crop_size: 2 }' % path,
                       phase=caffe_pb2.TEST)
    layer.forward([], top)
    for i in range(3):
        np.testing.assert_allclose(top[0].data[i], (chw[:, 1:3, 1:3] - 1.0) * 0.5)
    layer.close()


def test_data_layer_single_top_and_rand_skip(tmp_path):
    path = write_db(tmp_path / "db", [array_to_datum(np.full((1, 1, 1), i, np.uint8), i)
                                      for i in range(5)])
    layer, top = data_layer(path, 5, "rand_skip: 5", ntop=1)
    layer.forward([], top)
    first = int(top[0].data[0, 0, 0, 0])
    assert list(top[0].data.ravel().astype(int)) == [(first + k) % 5 for k in range(5)]
    layer.close()


def test_data_layer_errors(tmp_path):
    with pytest.raises(CaffeError, match=r"layer 'L' \(Data\): .*no such lmdb"):
        data_layer(tmp_path / "nope", 2)
    with pytest.raises(CaffeError, match="data_param.source is not set"):
        setup('type: "Data" data_param { batch_size: 1 }')


def test_prefetch_hides_a_slow_reader(tmp_path):
    path = write_db(tmp_path / "db", [array_to_datum(np.zeros((1, 2, 2), np.uint8), i) for i in range(4)])
    layer, top = data_layer(path, 2)
    layer.close()
    # A fresh layer whose reader takes 0.2 s per batch: once a batch is ready, forward is instant.
    from caffepy.data import prefetch as pf
    real = pf.Prefetcher

    def slow(load_batch, *a, **kw):
        def load(buf):
            time.sleep(0.2)
            load_batch(buf)
        return real(load, *a, **kw)

    pf_mod_layers = __import__("caffepy.layers.data", fromlist=["Prefetcher"])
    pf_mod_layers.Prefetcher = slow
    try:
        layer, top = data_layer(path, 2)
    finally:
        pf_mod_layers.Prefetcher = real
    deadline = time.time() + 5
    while layer.prefetcher.ready() < 2 and time.time() < deadline:
        time.sleep(0.01)
    t = time.perf_counter()
    layer.forward([], top)
    layer.forward([], top)
    assert time.perf_counter() - t < 0.1
    t = time.perf_counter()
    layer.close()
    assert time.perf_counter() - t < 1.0 and not layer.prefetcher.alive


def test_dropped_layer_stops_its_thread(tmp_path):
    path = write_db(tmp_path / "db", [array_to_datum(np.zeros((1, 1, 1), np.uint8), 0)])
    before = threading.active_count()
    layer, top = data_layer(path, 1)
    thread = layer.prefetcher._thread
    assert thread.daemon and thread.is_alive()
    del layer
    gc.collect()
    thread.join(2)
    assert not thread.is_alive() and threading.active_count() <= before


def test_reader_error_reaches_forward(tmp_path):
    path = str(tmp_path / "db")
    with open_db(path, "lmdb", "w") as db:
        db.put("0", array_to_datum(np.zeros((1, 1, 1), np.uint8)).SerializeToString())
        db.put("1", b"\xff\xff not a datum")
    layer, top = data_layer(path, 2)
    with pytest.raises(CaffeError, match="not a valid Datum"):
        layer.forward([], top)
    layer.close()


def write_images(tmp_path, n=5, size=(4, 6)):
    imgs = []
    lines = []
    (tmp_path / "im").mkdir()
    for i in range(n):
        img = RNG.integers(0, 256, size + (3,), dtype=np.uint8)
        name = "im/img %d.png" % i          # a space in the name: split at the last one
        (tmp_path / name).write_bytes(encode_image(img, "png"))
        imgs.append(img)
        lines.append("%s %d" % (name, i))
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return imgs


def test_image_data_layer(tmp_path):
    imgs = write_images(tmp_path)
    layer, top = setup('type: "ImageData" image_data_param { source: "%s" root_folder: "%s/" '
                       'batch_size: 2 shuffle: true }' % (tmp_path / "list.txt", tmp_path))
    labels = []
    for _ in range(5):
        layer.forward([], top)
        for j, lab in enumerate(top[1].data.astype(int)):
            np.testing.assert_array_equal(top[0].data[j], imgs[lab].transpose(2, 0, 1))
        labels += list(top[1].data.astype(int))
    assert sorted(labels) == sorted(list(range(5)) * 2)
    layer.close()
    layer, top = setup('type: "ImageData" image_data_param { source: "%s" root_folder: "%s/" '
                       'batch_size: 1 is_color: false new_height: 8 new_width: 3 }'
                       % (tmp_path / "list.txt", tmp_path))
    layer.forward([], top)
    assert top[0].shape == (1, 1, 8, 3)
    layer.close()
    with pytest.raises(CaffeError, match="new_height and new_width"):
        setup('type: "ImageData" image_data_param { source: "x" new_height: 3 }')


def test_memory_data_layer():
    layer, top = setup('type: "MemoryData" memory_data_param { batch_size: 2 channels: 1 '
                       'height: 2 width: 3 }')
    with pytest.raises(CaffeError, match="reset"):
        layer.forward([], top)
    data = RNG.standard_normal((4, 1, 2, 3)).astype(np.float32)
    labels = np.arange(4, dtype=np.float32).reshape(4, 1, 1, 1)
    layer.reset(data, labels, 4)
    for k in range(3):
        layer.forward([], top)
        rows = [(2 * k) % 4, (2 * k) % 4 + 1]
        np.testing.assert_array_equal(top[0].data, data[rows])
        np.testing.assert_array_equal(top[1].data, rows)
    with pytest.raises(CaffeError, match="multiple of batch_size"):
        layer.reset(data[:3], labels[:3], 3)
    with pytest.raises(CaffeError, match=r"N x 1 x 2 x 3"):
        layer.reset(np.zeros((2, 3, 2, 3)), np.zeros(2))
    layer.add_datum_vector([array_to_datum(np.full((1, 2, 3), 9, np.uint8), 5)] * 2)
    layer.forward([], top)
    assert top[0].data.max() == 9 and list(top[1].data) == [5, 5]


def test_hdf5_data_and_output(tmp_path):
    h5py = pytest.importorskip("h5py")
    rows = {}
    files = []
    for f in range(2):
        p = tmp_path / ("d%d.h5" % f)
        with h5py.File(p, "w") as h:
            h["data"] = RNG.standard_normal((3, 2, 2)).astype(np.float64)
            h["label"] = np.arange(3 * f, 3 * f + 3, dtype=np.int32)
            for r in range(3):
                rows[3 * f + r] = h["data"][r]
        files.append(str(p))
    (tmp_path / "list.txt").write_text("\n".join(files) + "\n")
    layer, top = setup('type: "HDF5Data" top: "data" top: "label" hdf5_data_param { source: "%s" '
                       'batch_size: 4 }' % (tmp_path / "list.txt"))
    assert top[0].shape == (4, 2, 2) and top[1].shape == (4,)
    seen = []
    for _ in range(3):
        layer.forward([], top)
        for j, lab in enumerate(top[1].data.astype(int)):
            np.testing.assert_allclose(top[0].data[j], rows[lab], rtol=1e-6)
        seen += list(top[1].data.astype(int))
    assert seen == [i % 6 for i in range(12)]
    shuffled, stop = setup('type: "HDF5Data" top: "data" top: "label" hdf5_data_param { '
                           'source: "%s" batch_size: 6 shuffle: true }' % (tmp_path / "list.txt"))
    shuffled.forward([], stop)
    assert sorted(stop[1].data.astype(int)) == list(range(6))
    with pytest.raises(CaffeError, match="no dataset 'other'"):
        setup('type: "HDF5Data" top: "other" hdf5_data_param { source: "%s" batch_size: 1 }'
              % (tmp_path / "list.txt"), ntop=1)

    out = make_layer('type: "HDF5Output" hdf5_output_param { file_name: "%s" }' % (tmp_path / "o.h5"),
                     dtype=np.float32)
    bottoms = make_blobs([RNG.standard_normal((2, 3)), np.array([1.0, 2.0])], np.float32)
    out.setup(bottoms, [])
    out.forward(bottoms, [])
    out.forward(bottoms, [])
    with h5py.File(tmp_path / "o.h5", "r") as h:
        np.testing.assert_allclose(h["data"][...], np.concatenate([bottoms[0].data] * 2))
        np.testing.assert_array_equal(h["label"][...], [1, 2, 1, 2])


def test_window_data_layer(tmp_path):
    img = RNG.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    (tmp_path / "a.png").write_bytes(encode_image(img, "png"))
    (tmp_path / "windows.txt").write_text(
        "# 0\na.png\n3\n10\n12\n3\n"
        "2 0.9 0 0 11 9\n"      # foreground, whole image
        "1 0.7 2 2 5 5\n"       # foreground
        "5 0.1 3 1 8 6\n")      # background (label forced to 0)
    layer, top = setup('type: "WindowData" window_data_param { source: "%s" root_folder: "%s/" '
                       'batch_size: 8 fg_fraction: 0.5 } transform_param { crop_size: 4 }'
                       % (tmp_path / "windows.txt", tmp_path))
    assert top[0].shape == (8, 3, 4, 4)
    layer.forward([], top)
    labels = top[1].data.astype(int)
    assert list(labels[:4]) == [0] * 4 and set(labels[4:]) <= {1, 2}
    from caffepy.data.image import resize_bilinear
    whole = resize_bilinear(img, 4, 4).transpose(2, 0, 1)
    for j in np.nonzero(labels == 2)[0]:
        np.testing.assert_array_equal(top[0].data[j], whole)
    layer.close()
    pad, ptop = setup('type: "WindowData" window_data_param { source: "%s" root_folder: "%s/" '
                      'batch_size: 4 fg_fraction: 1 context_pad: 1 crop_mode: "square" } '
                      'transform_param { crop_size: 6 mirror: true mean_value: 1 }'
                      % (tmp_path / "windows.txt", tmp_path))
    pad.forward([], ptop)
    assert ptop[0].shape == (4, 3, 6, 6) and np.isfinite(ptop[0].data).all()
    pad.close()


def test_two_layers_share_one_lmdb(tmp_path):
    from caffepy.data import db as dbmod
    path = write_db(tmp_path / "db", [array_to_datum(np.full((1, 1, 1), i, np.uint8), i) for i in range(3)])
    a, ta = data_layer(path, 2)
    b, tb = data_layer(path, 3, phase=caffe_pb2.TEST)
    a.forward([], ta)
    b.forward([], tb)
    assert list(ta[1].data) == [0, 1] and list(tb[1].data) == [0, 1, 2]
    a.close()
    b.forward([], tb)
    assert list(tb[1].data) == [0, 1, 2]
    b.close()
    assert os.path.realpath(path) not in dbmod._SHARED_ENVS


def test_image_data_new_dim_caffe_pro(tmp_path):
    """yihui-he/caffe-pro's ``new_dim``: the shorter side becomes new_dim, the other
    round(side * new_dim / shorter) (channel-pruning's VGG / ResNet nets); bicubic is refused."""
    from caffepy.data.image import encode_image, resize_bilinear
    rng = np.random.default_rng(7)
    tall, wide = (rng.integers(0, 256, s, dtype=np.uint8) for s in ((10, 4, 3), (6, 10, 3)))
    (tmp_path / "tall.png").write_bytes(encode_image(tall, "png"))
    (tmp_path / "wide.png").write_bytes(encode_image(wide, "png"))
    for name, img, new_dim, size in (("tall", tall, 2, (5, 2)), ("wide", wide, 3, (3, 5))):
        (tmp_path / "l.txt").write_text("%s.png 0\n" % name)
        layer, top = setup('type: "ImageData" image_data_param { source: "%s" root_folder: "%s/" '
                           'batch_size: 1 new_dim: %d }' % (tmp_path / "l.txt", tmp_path, new_dim))
        layer.forward([], top)
        assert top[0].shape == (1, 3) + size
        np.testing.assert_array_equal(top[0].data[0], resize_bilinear(img, *size).transpose(2, 0, 1))
        layer.close()
    with pytest.raises(CaffeError, match="bicubic"):
        setup('type: "ImageData" image_data_param { source: "%s" new_dim: 3 bicubic: true }'
              % (tmp_path / "l.txt"))
