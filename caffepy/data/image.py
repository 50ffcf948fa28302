"""Image files as Caffe's OpenCV calls see them, with Pillow: uint8, H x W x C, channels in BGR order.

- ``read_image(path, height=0, width=0, is_color=True)``: ``cv::imread`` (COLOR: 3 channels BGR, a
  gray file replicated, alpha dropped; GRAYSCALE: 1 channel) then ``cv::resize`` to
  ``width x height`` when both are > 0 (ReadImageToCVMat).
- ``decode_image(data, color=None)``: ``cv::imdecode``; ``color`` None keeps the file's own kind
  (gray stays 1 channel, anything else becomes 3-channel BGR: DecodeDatumToCVMatNative), True forces
  colour, False forces gray (DecodeDatumToCVMat).
- ``encode_image(img, ext)``: ``cv::imencode`` to ``png`` / ``jpg`` (``jpeg``) / ``bmp`` bytes.
- ``resize_bilinear(img, height, width)``: OpenCV's INTER_LINEAR (half-pixel centres, edge
  clamping, 11-bit fixed-point weights as its scalar path). Gray conversion uses Pillow's ITU-R
  601 luma, as OpenCV does up to rounding.
"""
import io
import os

import numpy as np

from ..errors import CaffeError

_FORMATS = {"png": "PNG", "jpg": "JPEG", "jpeg": "JPEG", "bmp": "BMP", "tif": "TIFF",
            "tiff": "TIFF", "ppm": "PPM", "pgm": "PPM"}


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise CaffeError("images need Pillow: pip install Pillow (or pip install caffepy[data])")
    return Image


def _to_array(im, color, what):
    """A PIL image → H x W x C uint8 BGR (C = 3) or gray (C = 1)."""
    if color is None:
        color = im.mode not in ("L", "1", "I;16", "I", "F", "LA")
    if color:
        rgb = np.asarray(im.convert("RGB"), dtype=np.uint8)
        return np.ascontiguousarray(rgb[:, :, ::-1])
    if im.mode in ("I;16", "I", "F"):
        gray = np.clip(np.asarray(im, dtype=np.float64) / (257.0 if im.mode == "I;16" else 1.0),
                       0, 255).astype(np.uint8)
    else:
        gray = np.asarray(im.convert("L"), dtype=np.uint8)
    if gray.ndim != 2:
        raise CaffeError("%s: cannot convert the image to gray" % what)
    return gray[:, :, None].copy()


def open_image(source, what, missing="could not open or find file", encoded=False):
    """A loaded Pillow image from a path or file object (``encoded``: from the bytes ``source``);
    a one-line CaffeError starting with ``what`` when the file is missing (``missing`` says so)
    or cannot be decoded."""
    Image = _pil()
    try:
        im = Image.open(io.BytesIO(bytes(source)) if encoded else source)
        im.load()
    except FileNotFoundError:
        raise CaffeError("%s: %s" % (what, missing))
    except Exception as e:  # Pillow raises many types for corrupt data
        raise CaffeError("%s: cannot decode image (%s)" % (what, " ".join(str(e).split())))
    return im


def decode_image(data, color=None, what="<encoded datum>"):
    """Decode PNG/JPEG/... bytes to an H x W x C uint8 BGR (or gray) array."""
    return _to_array(open_image(data, what, encoded=True), color, what)


def read_image(path, height=0, width=0, is_color=True):
    """Read an image file as ``cv::imread`` + optional ``cv::resize`` (both height and width > 0)."""
    img = _to_array(open_image(path, path), bool(is_color), path)
    if height > 0 and width > 0:
        img = resize_bilinear(img, height, width)
    return img


def encode_image(img, ext="png"):
    """Encode an H x W x C (C = 1 or 3, BGR) uint8 array to bytes of format ``ext``."""
    Image = _pil()
    fmt = _FORMATS.get(ext.lower().lstrip("."))
    if fmt is None:
        raise CaffeError("unknown image encoding '%s' (use one of: %s)" % (ext, ", ".join(sorted(_FORMATS))))
    img = np.asarray(img, dtype=np.uint8)
    if img.ndim == 3 and img.shape[2] == 3:
        im = Image.fromarray(np.ascontiguousarray(img[:, :, ::-1]), "RGB")
    else:
        im = Image.fromarray(np.ascontiguousarray(img.reshape(img.shape[0], img.shape[1])), "L")
    buf = io.BytesIO()
    kw = {"quality": 95} if fmt == "JPEG" else {}
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


def image_ext(path):
    """The lower-case extension of ``path`` without the dot ('' if none)."""
    return os.path.splitext(path)[1].lower().lstrip(".")


def linear_taps(f, src):
    """OpenCV's INTER_LINEAR along one axis of ``src`` samples: for each output sample at source
    position ``f`` (float64 array), the two source indices and the weight of the second, clamped
    at the edges (``i0``, ``i1``, ``frac``)."""
    i0 = np.floor(f).astype(np.int64)
    frac = f - i0
    low = i0 < 0
    i0[low], frac[low] = 0, 0.0
    high = i0 >= src - 1
    i0[high], frac[high] = src - 1, 0.0
    return i0, np.minimum(i0 + 1, src - 1), frac


def _axis_weights(src, dst):
    scale = src / float(dst)
    i0, i1, frac = linear_taps((np.arange(dst, dtype=np.float64) + 0.5) * scale - 0.5, src)
    w0 = np.rint((1.0 - frac) * 2048).astype(np.int64)
    w1 = np.rint(frac * 2048).astype(np.int64)
    return i0, i1, w0, w1


def resize_bilinear(img, height, width):
    """Resize H x W x C uint8 (or float) to ``height x width`` as OpenCV's INTER_LINEAR."""
    img = np.asarray(img)
    squeeze = img.ndim == 2
    if squeeze:
        img = img[:, :, None]
    h, w = img.shape[:2]
    if (h, w) == (height, width):
        return img[:, :, 0].copy() if squeeze else img.copy()
    y0, y1, b0, b1 = _axis_weights(h, height)
    x0, x1, a0, a1 = _axis_weights(w, width)
    if img.dtype == np.uint8:
        src = img.astype(np.int64)
        rows = src[:, x0] * a0[None, :, None] + src[:, x1] * a1[None, :, None]
        val = rows[y0] * b0[:, None, None] + rows[y1] * b1[:, None, None]
        out = np.clip((val + (1 << 21)) >> 22, 0, 255).astype(np.uint8)
    else:
        src = img.astype(np.float64)
        rows = (src[:, x0] * a0[None, :, None] + src[:, x1] * a1[None, :, None]) / 2048.0
        out = ((rows[y0] * b0[:, None, None] + rows[y1] * b1[:, None, None]) / 2048.0).astype(img.dtype)
    return out[:, :, 0] if squeeze else out


def read_image_list(path):
    """A Caffe image list file: ``<path> <label>`` per line, split at the LAST space.

    Returns [(path, label)]; blank lines are skipped; a line without a space or with a non-integer
    label is an error naming the file and line (Caffe's ImageData / convert_imageset parsing).
    """
    out = []
    try:
        f = open(path, "r", encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise CaffeError("%s: cannot open image list: %s" % (path, e.strerror or e))
    with f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            pos = line.rfind(" ")
            if pos < 0:
                raise CaffeError("%s:%d: expected '<path> <label>', got %r" % (path, lineno, line))
            try:
                label = int(line[pos + 1:])
            except ValueError:
                raise CaffeError("%s:%d: label %r is not an integer" % (path, lineno, line[pos + 1:]))
            out.append((line[:pos], label))
    return out
