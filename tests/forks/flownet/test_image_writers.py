"""FlowNet 2's ImgWriter and PFMWriter: bytes against transcriptions of output.cpp and CImg."""
import struct

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.flownet.image_writers import read_pfm, to_uchar
from caffepy.testing import make_blobs, make_layer


def _uchar(f):                  # (unsigned char)(float) on x86: int32 truncation, low byte
    f = float(np.float32(f))
    if f != f or not -2.0 ** 31 <= f < 2.0 ** 31:
        return 0
    return int(f) & 0xFF


def _pgm_ref(img, scale):
    h, w = img.shape
    out = b"P5\n%d %d \n255\n" % (w, h)
    for i in range(h * w):
        out += bytes([_uchar(np.float32(img.flat[i]) * np.float32(scale))])
    return out


def _ppm_ref(img, scale):
    _, h, w = img.shape
    out = b"P6 \n%d %d \n255\n" % (w, h)
    for i in range(h * w):
        for ch in (2, 1, 0):
            v = np.float32(img[ch].flat[i]) * np.float32(scale)
            out += bytes([_uchar(0 if v < 0 else (255 if v > 255 else v))])
    return out


def _run(text, x):
    layer, bottom = make_layer(text), make_blobs([x])
    layer.setup(bottom, [])
    layer.forward(bottom, [])


def test_to_uchar_wraps_like_the_c_cast():
    np.testing.assert_array_equal(to_uchar([1.9, -1.5, 300.0, np.nan, 1e12]),
                                  [1, 255, 44, 0, 0])


def test_img_writer_pgm_and_ppm_bytes(tmp_path):
    rng = np.random.default_rng(4)
    grey = rng.uniform(-20, 300, (2, 1, 3, 4))
    _run('type: "ImgWriter" writer_param { folder: "%s" prefix: "g" scale: 0.9 }' % tmp_path,
         grey)
    for n in range(2):
        got = (tmp_path / ("g0000000(%03d).pgm" % n)).read_bytes()
        assert got == _pgm_ref(grey[n, 0], 0.9)
    colour = rng.uniform(-20, 300, (1, 3, 2, 5))
    _run('type: "ImgWriter" writer_param { file: "%s" }' % (tmp_path / "c.ppm"), colour)
    assert (tmp_path / "c.ppm").read_bytes() == _ppm_ref(colour[0], 1.0)


def test_img_writer_normalize(tmp_path):
    img = np.array([[[[-3.0, -1.0], [-2.0, -0.5]]]])
    _run('type: "ImgWriter" writer_param { file: "%s" normalize: true }' % (tmp_path / "n.pgm"),
         img)
    raw = (tmp_path / "n.pgm").read_bytes()
    # the fork's max starts at FLT_MIN, so an all-negative image spans [min, FLT_MIN]
    mx, mn = np.float32(np.finfo(np.float32).tiny), np.float32(-3)
    want = [_uchar(np.float32(255) * (np.float32(v) - mn) / (mx - mn)) for v in img.ravel()]
    assert raw == b"P5\n2 2 \n255\n" + bytes(want)
    with pytest.raises(CaffeError, match="1 or 3 channels"):
        _run('type: "ImgWriter" writer_param { file: "x" }', np.zeros((1, 2, 2, 2)))


def test_pfm_writer_negates_and_writes_big_endian(tmp_path):
    x = np.random.default_rng(5).standard_normal((1, 1, 2, 3)).astype(np.float32)
    _run('type: "PFMWriter" writer_param { folder: "%s" suffix: "-d" }' % tmp_path, x)
    raw = (tmp_path / "0000000-d.pfm").read_bytes()
    assert raw[:11] == b"Pf\n3 2\n1.0\n"
    assert struct.unpack(">6f", raw[11:]) == tuple(-x.ravel())
    np.testing.assert_array_equal(read_pfm(tmp_path / "0000000-d.pfm"), -x[0])
    rg = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    _run('type: "PFMWriter" writer_param { file: "%s" }' % (tmp_path / "rg.pfm"), rg)
    back = read_pfm(tmp_path / "rg.pfm")
    np.testing.assert_array_equal(back[:2], -rg[0])
    assert not back[2].any()
    (tmp_path / "bad.pfm").write_bytes(b"PF\n3 2\n1.0\n" + b"\0" * 8)
    with pytest.raises(CaffeError, match="need 72 bytes"):
        read_pfm(tmp_path / "bad.pfm")
