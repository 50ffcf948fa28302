"""e2e_face's HDF5Data transforms and ``value`` filler (forks/misc/e2e_face_data.py)."""
import numpy as np
import pytest

from caffepy import fillers
from caffepy.blob import Blob
from caffepy.errors import CaffeError
from caffepy.forks.misc.e2e_face_data import TransformingHDF5DataLayer, crop_offsets
from caffepy.layers.data_hdf5 import HDF5DataLayer
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import make_blobs, make_layer

h5py = pytest.importorskip("h5py")

# the form of e2e_face's train_test.prototxt reader
READER = ('type: "HDF5Data" top: "I" top: "Id" hdf5_data_param { source: "%s" batch_size: %d '
          '%s }')


def _files(tmp_path, images, ids):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f["I"], f["Id"] = images, ids
    (tmp_path / "list.txt").write_text(str(path) + "\n")
    return str(tmp_path / "list.txt")


def _run(tmp_path, images, extra, batch, phase=caffe_pb2.TRAIN, steps=1):
    src = _files(tmp_path, images, np.arange(len(images), dtype=np.float32))
    layer = make_layer(READER % (src, batch, extra), dtype=np.float64, phase=phase)
    top = make_blobs(2)
    layer.setup([], top)
    out = []
    for _ in range(steps):
        layer.reshape([], top)
        layer.forward([], top)
        out.append((top[0].data.copy(), top[1].data.copy()))
    return layer, out


def test_fields_and_variant():
    p = parse_text('hdf5_data_param { scale: 0.00390625 mirror: true mean_value: 1 crop_size: 3 '
                   'crop_num: 5 }', caffe_pb2.LayerParameter()).hdf5_data_param
    assert (p.scale, p.mirror, list(p.mean_value), p.crop_size, p.crop_num) == \
        (0.00390625, True, [1.0], 3, 5)
    assert type(make_layer('type: "HDF5Data" hdf5_data_param { source: "x" }')) is HDF5DataLayer
    assert isinstance(make_layer('type: "HDF5Data" hdf5_data_param { scale: 2 }'),
                      TransformingHDF5DataLayer)


def test_scale_mean_and_mirror(tmp_path):
    x = np.arange(4 * 1 * 2 * 3, dtype=np.float32).reshape(4, 1, 2, 3)
    _, [(data, ids)] = _run(tmp_path, x, "scale: 0.5 mean_value: 1", 4)
    np.testing.assert_allclose(data, (x - 1) * 0.5)
    np.testing.assert_array_equal(ids, np.arange(4))
    _, out = _run(tmp_path, np.repeat(x[:1], 16, axis=0), "mirror: true", 16)
    flipped = [np.array_equal(d, x[0][..., ::-1]) for d in out[0][0]]
    assert any(flipped) and not all(flipped)
    assert all(f or np.array_equal(d, x[0]) for f, d in zip(flipped, out[0][0]))


def test_crop_at_load_and_reload_of_a_single_file(tmp_path):
    x = np.arange(2 * 1 * 4 * 5, dtype=np.float32).reshape(2, 1, 4, 5)
    _, [(data, _)] = _run(tmp_path, x, "crop_size: 2", 2, phase=caffe_pb2.TEST)
    np.testing.assert_array_equal(data, x[:, :, 1:3, 1:3])          # centred in TEST
    layer, out = _run(tmp_path, x, "crop_size: 2", 2, steps=6)
    offsets = set()
    for data, _ in out:
        for img, src in zip(data, x):
            win = np.lib.stride_tricks.sliding_window_view(src[0], (2, 2))
            hits = np.argwhere((win == img[0]).all(axis=(2, 3)))
            assert len(hits) == 1
            offsets.add(tuple(hits[0]))
        assert data.shape == (2, 1, 2, 2)
    assert len(offsets) > 1                  # one random window per load, redrawn at each pass


def test_test_time_crops(tmp_path):
    x = np.arange(2 * 1 * 4 * 5, dtype=np.float32).reshape(2, 1, 4, 5)
    _, [(data, ids)] = _run(tmp_path, x, "crop_size: 2 crop_num: 3", 2, phase=caffe_pb2.TEST)
    assert data.shape == (6, 1, 2, 2) and ids.shape == (2,)
    for i in range(2):
        for k, (ho, wo) in enumerate(crop_offsets(4, 5, 2)[:3]):
            np.testing.assert_array_equal(data[3 * i + k], x[i, :, ho:ho + 2, wo:wo + 2])
    assert crop_offsets(4, 5, 2) == [(1, 1), (0, 0), (2, 3), (0, 3), (2, 0)]
    x1 = np.repeat(x[:1], 2, axis=0)
    _, [(data, _)] = _run(tmp_path, x1, "crop_size: 2 crop_num: 2 mirror: true", 1,
                          phase=caffe_pb2.TEST)
    assert data.shape == (4, 1, 2, 2)        # mirror doubles crop_num in TEST: 2 flipped, 2 plain
    # the load-time mirror may have flipped the image first; its crops come flipped, then plain
    images = [x1[0], x1[0][..., ::-1]]
    plain = [np.stack([img[:, 1:3, 1:3], img[:, 0:2, 0:2]]) for img in images]
    assert any(np.array_equal(data[2:], p) for p in plain)
    np.testing.assert_array_equal(data[:2], data[2:][..., ::-1])


def test_refused_settings(tmp_path):
    x = np.zeros((2, 1, 4, 4), np.float32)
    with pytest.raises(CaffeError, match="crop_num > 1 is served in TEST only"):
        _run(tmp_path, x, "crop_size: 2 crop_num: 2", 1)
    with pytest.raises(CaffeError, match="at most 5 windows"):
        _run(tmp_path, x, "crop_size: 2 crop_num: 6", 1, phase=caffe_pb2.TEST)
    with pytest.raises(CaffeError, match="transform_param"):
        make_layer('type: "HDF5Data" hdf5_data_param { source: "x" batch_size: 1 scale: 2 } '
                   'transform_param { scale: 2 }').setup([], make_blobs(1))


def test_value_filler():
    p = caffe_pb2.FillerParameter(type="value")
    p.values.extend([0.7, 0, 0, 0, 0.7, 0])
    blob = Blob((2, 4))
    fillers.fill(blob, p)
    np.testing.assert_allclose(blob.data, [[0.7, 0, 0, 0], [0.7, 0, 0, 0]])
    p.values.extend([1, 2, 3])
    with pytest.raises(CaffeError, match="9 values for a blob of 8 entries"):
        fillers.fill(blob, p)
