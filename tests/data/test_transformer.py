"""DataTransformer against a literal per-pixel numpy transcription of Caffe's Transform loop."""
import itertools

import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.data.datum import array_to_datum, encoded_datum, write_mean
from caffepy.data.image import encode_image
from caffepy.data.transformer import DataTransformer, effective_transform_param
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2

RNG = np.random.default_rng(3)


def tparam(text):
    return text_format.Parse(text, caffe_pb2.TransformationParameter())


def caffe_item(x, crop, h_off, w_off, mirror, scale, mean=None, mean_values=None):
    """Caffe's DataTransformer::Transform(const Datum&) written as its loops."""
    c_, h_, w_ = x.shape
    height, width = (crop, crop) if crop else (h_, w_)
    out = np.zeros((c_, height, width))
    mv = None
    if mean_values is not None:
        mv = list(mean_values) * (c_ if len(mean_values) == 1 else 1)
    for c in range(c_):
        for h in range(height):
            for w in range(width):
                e = float(x[c, h_off + h, w_off + w])
                if mean is not None:
                    v = (e - mean[c, h_off + h, w_off + w]) * scale
                elif mv is not None:
                    v = (e - mv[c]) * scale
                else:
                    v = e * scale
                out[c, h, width - 1 - w if mirror else w] = v
    return out


def assert_matches_some_choice(x, got, crop, scale, mirror_allowed, **kw):
    c_, h_, w_ = x.shape
    offs = itertools.product(range(h_ - crop + 1), range(w_ - crop + 1)) if crop else [(0, 0)]
    for (ho, wo), m in itertools.product(list(offs), [False, True] if mirror_allowed else [False]):
        ref = caffe_item(x, crop, ho, wo, m, scale, **kw)
        if np.allclose(got, ref, rtol=1e-6, atol=1e-6):
            return ho, wo, m
    raise AssertionError("output matches no crop/mirror choice")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_test_phase_centre_crop_mean_file_scale(tmp_path, dtype):
    x = RNG.integers(0, 256, (4, 2, 7, 6), dtype=np.uint8)
    mean = (RNG.random((2, 7, 6)) * 255).astype(np.float32)
    write_mean(mean, tmp_path / "m.binaryproto")
    p = tparam('scale: 0.5 crop_size: 3 mean_file: "%s"' % (tmp_path / "m.binaryproto"))
    t = DataTransformer(p, caffe_pb2.TEST, dtype)
    assert t.infer_shape((2, 7, 6)) == (2, 3, 3)
    out = t.transform(x)
    assert out.dtype == dtype and out.shape == (4, 2, 3, 3)
    for i in range(4):
        ref = caffe_item(x[i], 3, (7 - 3) // 2, (6 - 3) // 2, False, 0.5, mean=mean)
        np.testing.assert_allclose(out[i], ref, rtol=1e-6)


@pytest.mark.parametrize("mean_value", ["mean_value: 10", "mean_value: 1 mean_value: 2 mean_value: 3"])
def test_train_random_crop_mirror_mean_values(mean_value):
    x = RNG.integers(0, 256, (40, 3, 5, 4), dtype=np.uint8)
    p = tparam("scale: 0.25 crop_size: 3 mirror: true " + mean_value)
    t = DataTransformer(p, caffe_pb2.TRAIN, np.float32, seed=1)
    out = t.transform(x)
    mvs = [float(v) for v in mean_value.replace("mean_value:", "").split()]
    choices = [assert_matches_some_choice(x[i], out[i], 3, 0.25, True, mean_values=mvs)
               for i in range(40)]
    assert len({c[:2] for c in choices}) > 1 and {c[2] for c in choices} == {False, True}


def test_train_random_crop_with_mean_file_uses_uncropped_positions(tmp_path):
    x = RNG.integers(0, 256, (12, 1, 6, 6), dtype=np.uint8)
    mean = (RNG.random((1, 6, 6)) * 100).astype(np.float32)
    write_mean(mean, tmp_path / "m.binaryproto")
    t = DataTransformer(tparam('crop_size: 4 mean_file: "%s"' % (tmp_path / "m.binaryproto")),
                        caffe_pb2.TRAIN, np.float64, seed=5)
    out = t.transform(x)
    for i in range(12):
        assert_matches_some_choice(x[i], out[i], 4, 1.0, False, mean=mean)


def test_no_crop_mirror_float_input():
    x = RNG.standard_normal((30, 2, 3, 4)).astype(np.float32)
    out = DataTransformer(tparam("mirror: true scale: 2"), caffe_pb2.TEST, seed=0).transform(x)
    flipped = [np.allclose(out[i], 2 * x[i, :, :, ::-1]) for i in range(30)]
    same = [np.allclose(out[i], 2 * x[i]) for i in range(30)]
    assert all(f or s for f, s in zip(flipped, same)) and any(flipped) and any(same)


def test_transform_datums_raw_float_and_encoded():
    bgr = RNG.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    datums = [array_to_datum(bgr.transpose(2, 0, 1)), encoded_datum(encode_image(bgr, "png"), 1),
              array_to_datum(bgr.transpose(2, 0, 1).astype(np.float32))]
    out = DataTransformer(tparam("scale: 0.5"), caffe_pb2.TEST).transform_datums(datums)
    for i in range(3):
        np.testing.assert_allclose(out[i], bgr.transpose(2, 0, 1) * 0.5)
    gray = DataTransformer(tparam("force_gray: true"), caffe_pb2.TEST).transform_datums(datums[1:2])
    assert gray.shape == (1, 1, 4, 5)


def test_errors(tmp_path):
    with pytest.raises(CaffeError, match="mean_file and mean_value"):
        DataTransformer(tparam('mean_file: "x" mean_value: 1'))
    with pytest.raises(CaffeError, match="force_color and force_gray"):
        DataTransformer(tparam("force_color: true force_gray: true"))
    with pytest.raises(CaffeError, match="1 mean_value or as many as channels"):
        DataTransformer(tparam("mean_value: 1 mean_value: 2")).transform(np.zeros((1, 3, 2, 2)))
    with pytest.raises(CaffeError, match="crop_size 5 is larger"):
        DataTransformer(tparam("crop_size: 5")).transform(np.zeros((1, 1, 4, 4)))
    write_mean(np.zeros((1, 2, 2)), tmp_path / "m")
    with pytest.raises(CaffeError, match="mean_file .* has shape"):
        DataTransformer(tparam('mean_file: "%s"' % (tmp_path / "m"))).transform(np.zeros((1, 1, 3, 3)))


def test_legacy_fields_fill_transform_param():
    lp = text_format.Parse('data_param { scale: 0.5 crop_size: 3 mirror: true } '
                           'transform_param { scale: 2 }', caffe_pb2.LayerParameter())
    tp = effective_transform_param(lp, lp.data_param)
    assert (tp.scale, tp.crop_size, tp.mirror) == (2, 3, True)


def test_seeded_runs_are_reproducible():
    import caffepy
    x = RNG.integers(0, 256, (8, 1, 6, 6), dtype=np.uint8)
    p = tparam("crop_size: 3 mirror: true")
    caffepy.set_random_seed(11)
    a = DataTransformer(p, caffe_pb2.TRAIN).transform(x)
    caffepy.set_random_seed(11)
    b = DataTransformer(p, caffe_pb2.TRAIN).transform(x)
    np.testing.assert_array_equal(a, b)
