"""caffepy.io: pycaffe's test_io.py behaviours, the Transformer, images, resize and oversample."""
import numpy as np
import pytest

import caffepy as caffe
from caffepy.errors import CaffeError


def test_blobproto_old_and_new_shapes():
    blob = caffe.proto.caffe_pb2.BlobProto()
    blob.data.extend(np.zeros(100).tolist())
    blob.num, blob.channels, blob.height, blob.width = (1, 1, 10, 10)
    assert caffe.io.blobproto_to_array(blob).shape == (1, 1, 10, 10)
    blob = caffe.proto.caffe_pb2.BlobProto()
    blob.data.extend(np.zeros(100).tolist())
    blob.shape.dim.extend([10, 10])
    assert caffe.io.blobproto_to_array(blob).shape == (10, 10)


def test_blobproto_without_shape():
    blob = caffe.proto.caffe_pb2.BlobProto()
    blob.data.extend(np.zeros(100).tolist())
    with pytest.raises(ValueError):
        caffe.io.blobproto_to_array(blob)
    scalar = caffe.proto.caffe_pb2.BlobProto()
    scalar.data.append(123)
    assert caffe.io.blobproto_to_array(scalar) == 123


def test_blobproto_round_trips_with_diff_and_vectors():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    blob = caffe.io.array_to_blobproto(a, diff=-a)
    assert np.array_equal(caffe.io.blobproto_to_array(blob), a)
    assert np.array_equal(caffe.io.blobproto_to_array(blob, return_diff=True), -a)
    arrays = [a, np.ones((1, 2, 3, 4))]
    back = caffe.io.blobprotovector_str_to_arraylist(caffe.io.arraylist_to_blobprotovector_str(arrays))
    assert [x.shape for x in back] == [(2, 3, 4), (1, 2, 3, 4)] and np.array_equal(back[0], a)


def test_datum_label_and_round_trip():
    with_label = caffe.io.array_to_datum(np.ones((10, 10, 3)), label=1)
    without = caffe.io.array_to_datum(np.ones((10, 10, 3)))
    assert len(with_label.SerializeToString()) > len(without.SerializeToString())
    u8 = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    d = caffe.io.array_to_datum(u8, label=3)
    assert d.data == u8.tobytes() and d.label == 3
    assert np.array_equal(caffe.io.datum_to_array(d), u8)
    f = np.linspace(0, 1, 24).reshape(2, 3, 4)
    np.testing.assert_allclose(caffe.io.datum_to_array(caffe.io.array_to_datum(f)), f, rtol=1e-6)
    with pytest.raises(ValueError):
        caffe.io.array_to_datum(np.zeros((2, 2)))


def _transformer():
    t = caffe.io.Transformer({"data": (1, 3, 6, 8)})
    t.set_transpose("data", (2, 0, 1))
    t.set_channel_swap("data", (2, 1, 0))
    t.set_raw_scale("data", 255)
    t.set_mean("data", np.array([104.0, 117.0, 123.0]))
    t.set_input_scale("data", 0.5)
    return t


def test_transformer_order_of_steps_and_inverse():
    img = np.random.default_rng(0).random((6, 8, 3)).astype(np.float32)
    t = _transformer()
    out = t.preprocess("data", img)
    assert out.shape == (3, 6, 8) and out.dtype == np.float32
    expect = (img.transpose(2, 0, 1)[[2, 1, 0]] * 255 - np.array([104, 117, 123])[:, None, None]) * 0.5
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(t.deprocess("data", out), img, rtol=1e-5, atol=1e-5)


def test_transformer_resizes_and_checks():
    t = _transformer()
    assert t.preprocess("data", np.random.random((12, 16, 3))).shape == (3, 6, 8)
    with pytest.raises(CaffeError, match="not one of the net inputs"):
        t.preprocess("other", np.zeros((6, 8, 3)))
    with pytest.raises(CaffeError, match="set_transpose"):
        t.set_transpose("data", (1, 0))
    with pytest.raises(CaffeError, match="set_channel_swap"):
        t.set_channel_swap("data", (1, 0))
    with pytest.raises(CaffeError, match="set_mean"):
        t.set_mean("data", np.zeros(4))
    t.set_mean("data", np.ones((3, 12, 16)))       # elementwise mean of another size is resized
    assert t.mean["data"].shape == (3, 6, 8)


def test_load_image_color_and_gray(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    rgb = np.zeros((4, 5, 3), np.uint8)
    rgb[..., 0] = 255
    rgb[1, 2] = (0, 255, 0)
    Image.fromarray(rgb).save(str(tmp_path / "c.png"))
    Image.fromarray(np.full((4, 5), 128, np.uint8)).save(str(tmp_path / "g.png"))
    Image.fromarray(np.dstack([rgb, np.full((4, 5), 7, np.uint8)])).save(str(tmp_path / "a.png"))
    img = caffe.io.load_image(str(tmp_path / "c.png"))
    assert img.shape == (4, 5, 3) and img.dtype == np.float32
    assert img[0, 0].tolist() == [1, 0, 0] and img[1, 2].tolist() == [0, 1, 0]
    gray = caffe.io.load_image(str(tmp_path / "c.png"), color=False)
    assert gray.shape == (4, 5, 1) and gray[0, 0, 0] == pytest.approx(0.2125)
    g = caffe.io.load_image(str(tmp_path / "g.png"))
    assert g.shape == (4, 5, 3) and np.allclose(g, 128 / 255.0)
    assert caffe.io.load_image(str(tmp_path / "g.png"), color=False).shape == (4, 5, 1)
    assert caffe.io.load_image(str(tmp_path / "a.png")).shape == (4, 5, 3)
    with pytest.raises(CaffeError, match="no such file"):
        caffe.io.load_image(str(tmp_path / "missing.png"))


def test_resize_image():
    im = np.random.default_rng(1).random((10, 20, 3)).astype(np.float32)
    for order in (0, 1):
        out = caffe.io.resize_image(im, (5, 7), interp_order=order)
        assert out.shape == (5, 7, 3) and out.dtype == np.float32
        assert im.min() - 1e-6 <= out.min() and out.max() <= im.max() + 1e-6
    np.testing.assert_allclose(caffe.io.resize_image(im, (10, 20)), im, rtol=1e-6)
    const = caffe.io.resize_image(np.full((3, 3, 2), 4.0), (6, 5))
    assert const.shape == (6, 5, 2) and (const == 4).all()
    up = caffe.io.resize_image(np.array([[[0.0], [1.0]]]), (1, 4))
    np.testing.assert_allclose(up.ravel(), [0, 0.25, 0.75, 1])
    five = caffe.io.resize_image(np.random.random((4, 4, 5)), (8, 8))
    assert five.shape == (8, 8, 5)


def test_oversample_corners_center_and_mirrors():
    im = np.arange(6 * 8, dtype=np.float32).reshape(6, 8, 1)
    crops = caffe.io.oversample([im, im + 100], (4, 4))
    assert crops.shape == (20, 4, 4, 1)
    assert np.array_equal(crops[0], im[:4, :4]) and np.array_equal(crops[3], im[2:, 4:])
    assert np.array_equal(crops[4], im[1:5, 2:6])
    for k in range(5):
        assert np.array_equal(crops[5 + k], crops[k][:, ::-1])
    assert np.array_equal(crops[10], im[:4, :4] + 100)
