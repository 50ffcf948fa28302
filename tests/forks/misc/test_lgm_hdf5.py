import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer

RNG = np.random.default_rng(4)


def _h5(tmp_path, x, y):
    h5py = pytest.importorskip("h5py")
    with h5py.File(str(tmp_path / "d.h5"), "w") as f:
        f["data"] = x
        f["label"] = y
    (tmp_path / "list.txt").write_text(str(tmp_path / "d.h5") + "\n")
    return str(tmp_path / "list.txt")


def _hdf5_layer(source, fields, phase):
    return make_layer('type: "HDF5Data" top: "data" top: "label" hdf5_data_param { '
                      'source: "%s" batch_size: 2 %s }' % (source, fields), phase=phase)


def test_hdf5_centre_crop_mean_scale_in_test(tmp_path):
    x = np.arange(2 * 1 * 4 * 4, dtype=np.float64).reshape(2, 1, 4, 4)
    src = _h5(tmp_path, x, np.array([3.0, 5.0]))
    layer = _hdf5_layer(src, "crop_size: 2 mean_value: 1 scale: 0.5", caffe_pb2.TEST)
    data, label = run_layer(layer, [], make_blobs(2))
    np.testing.assert_allclose(data, (x[:, :, 1:3, 1:3] - 1) * 0.5)
    np.testing.assert_allclose(label, [3, 5])


def test_hdf5_test_mirror_gives_flipped_then_plain_windows(tmp_path):
    x = RNG.standard_normal((2, 2, 5, 5))
    src = _h5(tmp_path, x, np.array([0.0, 1.0]))
    layer = _hdf5_layer(src, "crop_size: 3 crop_num: 2 mirror: true", caffe_pb2.TEST)
    data, label = run_layer(layer, [], make_blobs(2))
    assert data.shape == (8, 2, 3, 3) and label.shape == (2,)
    # the load-time mirror may have flipped a whole image; the windows are taken from that image
    for i in range(2):
        img = x[i] if np.allclose(data[4 * i + 2], x[i, :, 1:4, 1:4]) else x[i][..., ::-1]
        wins = [img[:, 1:4, 1:4], img[:, 0:3, 0:3]]
        expect = [v[..., ::-1] for v in wins] + wins
        np.testing.assert_allclose(data[4 * i:4 * i + 4], np.stack(expect))


def test_hdf5_train_random_crop_and_mirror(tmp_path):
    x = RNG.standard_normal((4, 1, 5, 6))
    src = _h5(tmp_path, x, np.arange(4.0))
    layer = _hdf5_layer(src, "crop_size: 3 mirror: true", caffe_pb2.TRAIN)
    data, _ = run_layer(layer, [], make_blobs(2))
    assert data.shape == (2, 1, 3, 3)
    hits = [any(np.allclose(data[i], v[..., a:a + 3, b:b + 3])
                for v in (x[i], x[i][..., ::-1]) for a in range(3) for b in range(4))
            for i in range(2)]
    assert all(hits)
    with pytest.raises(NetError, match="crop_num"):
        _hdf5_layer(src, "crop_size: 3 crop_num: 2", caffe_pb2.TRAIN).setup([], make_blobs(2))


def test_hdf5_single_file_is_transformed_anew_every_pass(tmp_path):
    x = RNG.standard_normal((2, 1, 6, 6))
    src = _h5(tmp_path, x, np.arange(2.0))
    layer = _hdf5_layer(src, "crop_size: 2", caffe_pb2.TRAIN)
    top = make_blobs(2)
    layer.setup([], top)
    seen = set()
    for _ in range(12):
        layer.forward([], top)
        a, b = (int(v) for v in np.argwhere(np.isclose(x[0, 0], top[0].data[0, 0, 0, 0]))[0])
        seen.add((a, b))
    assert len(seen) > 1               # the crop offset is drawn again at each reload
