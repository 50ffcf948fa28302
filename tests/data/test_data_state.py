"""Every data layer's state (caffepy.data.state): taken after k batches, saved as a LayerState and
given to a fresh layer, the next batches are the ones the first layer gives (cursor, shuffle order,
random crops / mirrors, window draws), whatever the prefetch thread had read ahead."""
import sys

import numpy as np
import pytest

from caffepy.data import state as data_state
from caffepy.data.datum import array_to_datum
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2

from .test_layers import RNG, setup, write_db, write_images


def _batches(layer, top, n):
    out = []
    for _ in range(n):
        layer.forward([], top)
        out.append([t.data.copy() for t in top])
    return out


def _check_resume(make, k=3, m=4):
    """``make()`` -> (layer, top). Read k batches, save, read m; a fresh layer given the saved
    state must read the same m."""
    layer, top = make()
    _batches(layer, top, k)
    saved = data_state.encode("x", layer.get_data_state())
    saved = caffe_pb2.LayerState.FromString(saved.SerializeToString())       # through the wire
    want = _batches(layer, top, m)
    _close(layer)                                 # (a LevelDB opens in one layer at a time)
    fresh, ftop = make()
    fresh.set_data_state(data_state.decode(saved))
    got = _batches(fresh, ftop, m)
    _close(fresh)
    for a, b in zip(want, got):
        for x, y in zip(a, b):
            assert x.tobytes() == y.tobytes()
    restarted, rtop = make()                      # and without the state it would differ
    assert any(x.tobytes() != y.tobytes()
               for a, b in zip(want, _batches(restarted, rtop, m)) for x, y in zip(a, b))
    _close(restarted)


def _close(layer):
    if hasattr(layer, "close"):
        layer.close()


@pytest.mark.parametrize("backend", ["lmdb", "leveldb"])
def test_data_layer_lmdb_leveldb(tmp_path, backend):
    pytest.importorskip("plyvel" if backend == "leveldb" else "lmdb")
    datums = [array_to_datum(RNG.integers(0, 256, (1, 5, 5), dtype=np.uint8), label=i) for i in range(11)]
    path = write_db(tmp_path / "db", datums, backend)
    _check_resume(lambda: setup('type: "Data" data_param { source: "%s" batch_size: 2 backend: %s '
                                'prefetch: 3 } transform_param { crop_size: 3 mirror: true }'
                                % (path, backend.upper())))


def test_image_data_shuffled(tmp_path):
    write_images(tmp_path, n=5)
    _check_resume(lambda: setup('type: "ImageData" image_data_param { source: "%s" root_folder: '
                                '"%s/" batch_size: 2 shuffle: true } transform_param { mirror: true }'
                                % (tmp_path / "list.txt", tmp_path)), k=4, m=5)


def _write_pairs(tmp_path, n=5, size=(6, 8)):
    """n image / label-image pairs (PNG) and their list file, ``<image> <label image>`` a line."""
    lines = []
    for i in range(n):
        for kind, channels, top in (("img", 3, 256), ("lab", 1, 5)):
            arr = RNG.integers(0, top, size + (channels,), dtype=np.uint8)
            (tmp_path / ("%s%d.png" % (kind, i))).write_bytes(encode_image(arr, "png"))
        lines.append("img%d.png lab%d.png" % (i, i))
    (tmp_path / "pairs.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "pairs.txt"


def test_dense_image_data_shuffled(tmp_path):
    """SegNet's DenseImageData: cursor, shuffled order and random crops / mirrors."""
    source = _write_pairs(tmp_path)
    _check_resume(lambda: setup('type: "DenseImageData" dense_image_data_param { source: "%s" '
                                'root_folder: "%s/" batch_size: 2 shuffle: true crop_height: 4 '
                                'crop_width: 5 } transform_param { mirror: true }'
                                % (source, tmp_path)), k=4, m=5)


def test_image_seg_data_shuffled(tmp_path):
    """DeepLab's ImageSegData: cursor, shuffled order and random crops / mirrors."""
    source = _write_pairs(tmp_path)
    _check_resume(lambda: setup('type: "ImageSegData" image_data_param { source: "%s" '
                                'root_folder: "%s/" batch_size: 2 shuffle: true label_type: PIXEL } '
                                'transform_param { crop_size: 4 mirror: true }'
                                % (source, tmp_path), ntop=3), k=4, m=5)


def test_hdf5_data_shuffled(tmp_path):
    h5py = pytest.importorskip("h5py")
    files = []
    for f in range(2):
        p = tmp_path / ("d%d.h5" % f)
        with h5py.File(p, "w") as h:
            h["data"] = RNG.standard_normal((5, 2)).astype(np.float32)
            h["label"] = np.arange(5 * f, 5 * f + 5, dtype=np.float32)
        files.append(str(p))
    (tmp_path / "list.txt").write_text("\n".join(files) + "\n")
    _check_resume(lambda: setup('type: "HDF5Data" top: "data" top: "label" hdf5_data_param { '
                                'source: "%s" batch_size: 3 shuffle: true }' % (tmp_path / "list.txt")),
                  k=3, m=6)


def test_window_data(tmp_path):
    img = RNG.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    (tmp_path / "a.png").write_bytes(encode_image(img, "png"))
    (tmp_path / "windows.txt").write_text("# 0\na.png\n3\n10\n12\n3\n2 0.9 0 0 11 9\n1 0.7 2 2 5 5\n"
                                          "5 0.1 3 1 8 6\n")
    _check_resume(lambda: setup('type: "WindowData" window_data_param { source: "%s" root_folder: '
                                '"%s/" batch_size: 4 fg_fraction: 0.5 } transform_param { crop_size: 4 '
                                'mirror: true }' % (tmp_path / "windows.txt", tmp_path)))


def test_memory_data():
    def make():
        layer, top = setup('type: "MemoryData" memory_data_param { batch_size: 2 channels: 1 '
                           'height: 1 width: 2 }')
        layer.reset(np.arange(12, dtype=np.float32).reshape(6, 1, 1, 2), np.arange(6, dtype=np.float32))
        return layer, top
    _check_resume(make, k=1, m=2)


class CountingLayer(object):
    """A Python data layer with state: a counter and a numpy Generator."""

    def __init__(self, layer_param):
        self.i, self.rng = 0, np.random.default_rng(1)

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        top[0].reshape(2)

    def forward(self, bottom, top):
        top[0].data[...] = [self.i, self.rng.random()]
        self.i += 1

    def backward(self, top, propagate_down, bottom):
        pass

    def get_state(self):
        return {"i": self.i, "rng": self.rng, "note": "counting"}

    def set_state(self, state):
        assert state["note"] == "counting"
        self.i = state["i"]
        self.rng.bit_generator.state = state["rng"]


def test_python_layer_get_set_state(monkeypatch):
    monkeypatch.setitem(sys.modules, "stateful_layers", sys.modules[__name__])
    _check_resume(lambda: setup('type: "Python" python_param { module: "stateful_layers" '
                                'layer: "CountingLayer" }', ntop=1), k=2, m=2)


def test_state_encoding_errors_and_round_trip():
    values = {"a": np.arange(6, dtype=">f4").reshape(2, 3), "n": 7, "s": "text", "b": b"\x00\x01",
              "g": np.random.default_rng(3)}
    back = data_state.decode(data_state.encode("x", values))
    assert back["a"].dtype == np.dtype("<f4") and np.array_equal(back["a"], values["a"])
    assert back["n"] == 7 and back["s"] == "text" and back["b"] == b"\x00\x01"
    g = np.random.default_rng()
    data_state.set_rng(g, back["g"])
    assert g.random() == np.random.default_rng(3).random()
    with pytest.raises(CaffeError, match="'o' of type object cannot be saved"):
        data_state.encode("x", {"o": object()})
