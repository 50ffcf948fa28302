"""scipy.misc's image functions as scipy < 1.3 had them (``scipy/misc/pilutil.py``), over Pillow.

Given only to the user modules that read them (:mod:`caffepy.layers.legacy_import`). Pillow is
imported when one is called.

* ``bytescale(data, cmin=None, cmax=None, high=255, low=0)``: uint8 data is returned as it is;
  otherwise ``cmin`` / ``cmax`` default to the data's min / max, ``scale = (high - low) / (cmax -
  cmin)`` (a zero range counts as 1) and the result is ``uint8(clip((data - cmin) * scale + low,
  low, high) + 0.5)``.
* ``toimage(arr, high=255, low=0, cmin=None, cmax=None, pal=None, mode=None, channel_axis=None)``:
  a 2-D array becomes an ``'F'`` image (float32 values) for ``mode='F'``, an ``'L'`` image of its
  bytescaled values for ``mode`` None / ``'L'`` / ``'P'`` (``'P'`` with ``pal`` or a grey
  palette), ``'1'`` of ``arr > high``, ``'I'`` of ``(arr - cmin) * (high - low) / (cmax - cmin) +
  low`` as uint32; a 3-D array with a channel axis of 3 or 4 (the first such axis, or
  ``channel_axis``) is bytescaled to ``'RGB'`` / ``'RGBA'`` (or ``mode`` ``'YCbCr'`` / ``'CMYK'``).
* ``fromimage(im, flatten=False, mode=None)``: the image as an array, converted to ``mode`` first;
  a palette image becomes RGB (RGBA with transparency), ``'1'`` becomes ``'L'``, ``flatten`` gives
  ``'F'`` (float32 grey).
* ``imresize(arr, size, interp='bilinear', mode=None)``: ``toimage(arr, mode=mode)`` resized by
  Pillow and returned through ``fromimage``: ``size`` an int is a percentage, a float a fraction
  of each side (``int(side * fraction)``), a tuple ``(height, width)``; ``interp`` ``'nearest'``,
  ``'lanczos'``, ``'bilinear'``, ``'bicubic'`` / ``'cubic'``. So the result is uint8 (bytescaled:
  an image's range is stretched to 0..255) unless ``mode='F'``, which keeps float32 values.
* ``imread(name, flatten=False, mode=None)``: ``fromimage`` of the opened file;
  ``imsave(name, arr, format=None)``: ``toimage(arr, channel_axis=2)`` saved.

Pillow's resampling filters are today's (antialiased when shrinking, as Pillow >= 2.7 was under
the last scipy that had these), so values can differ by a grey level from a 2015 install.
"""
import numpy as np

INTERP = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "cubic": 3}
_MODE_ERROR = "Mode is unknown or incompatible with input array shape."


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("scipy.misc's image functions need Pillow (pip install Pillow)")
    return Image


def bytescale(data, cmin=None, cmax=None, high=255, low=0):
    data = np.asarray(data)
    if data.dtype == np.uint8:
        return data
    if high > 255:
        raise ValueError("`high` should be less than or equal to 255.")
    if low < 0:
        raise ValueError("`low` should be greater than or equal to 0.")
    if high < low:
        raise ValueError("`high` should be greater than or equal to `low`.")
    cmin = data.min() if cmin is None else cmin
    cmax = data.max() if cmax is None else cmax
    span = cmax - cmin
    if span < 0:
        raise ValueError("`cmax` should be larger than `cmin`.")
    scale = float(high - low) / (span if span != 0 else 1)
    scaled = (data - cmin) * scale + low
    return (scaled.clip(low, high) + 0.5).astype(np.uint8)


def toimage(arr, high=255, low=0, cmin=None, cmax=None, pal=None, mode=None, channel_axis=None):
    Image = _pil()
    data = np.asarray(arr)
    if np.iscomplexobj(data):
        raise ValueError("Cannot convert a complex-valued array.")
    shape = list(data.shape)
    if not (len(shape) == 2 or (len(shape) == 3 and (3 in shape or 4 in shape))):
        raise ValueError("'arr' does not have a suitable array shape for any mode.")
    if len(shape) == 2:
        return _gray_image(Image, data, (shape[1], shape[0]), high, low, cmin, cmax, pal, mode)
    if channel_axis is None:
        axes = [i for i, n in enumerate(shape) if n == 3] or [i for i, n in enumerate(shape)
                                                              if n == 4]
        axis = axes[0]
    else:
        axis = channel_axis
    channels = shape[axis]
    if channels not in (3, 4):
        raise ValueError("Channel axis dimension is not valid.")
    scaled = np.moveaxis(bytescale(data, cmin, cmax, high, low), axis, 2)
    mode = mode or ("RGB" if channels == 3 else "RGBA")
    if mode not in ("RGB", "RGBA", "YCbCr", "CMYK"):
        raise ValueError(_MODE_ERROR)
    if (mode in ("RGB", "YCbCr")) != (channels == 3):
        raise ValueError("Invalid array shape for mode.")
    return Image.frombytes(mode, (scaled.shape[1], scaled.shape[0]),
                           np.ascontiguousarray(scaled).tobytes())


def _gray_image(Image, data, size, high, low, cmin, cmax, pal, mode):
    if mode == "F":
        return Image.frombytes("F", size, data.astype(np.float32).tobytes())
    if mode in (None, "L", "P"):
        image = Image.frombytes("L", size, bytescale(data, cmin, cmax, high, low).tobytes())
        if pal is not None:
            image.putpalette(np.asarray(pal, dtype=np.uint8).tobytes())
        elif mode == "P":
            grey = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)
            image.putpalette(grey.tobytes())
        return image
    if mode == "1":
        return Image.frombytes("1", size, np.packbits(data > high, axis=1).tobytes())
    if mode != "I":
        raise ValueError(_MODE_ERROR)
    cmin = data.min() if cmin is None else cmin
    cmax = data.max() if cmax is None else cmax
    values = (data * 1.0 - cmin) * (high - low) / (cmax - cmin) + low
    return Image.frombytes("I", size, values.astype(np.uint32).tobytes())


def fromimage(im, flatten=False, mode=None):
    Image = _pil()
    if not isinstance(im, Image.Image):
        raise TypeError("Input is not a PIL image.")
    if mode is not None:
        if mode != im.mode:
            im = im.convert(mode)
    elif im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    if flatten:
        im = im.convert("F")
    elif im.mode == "1":
        im = im.convert("L")
    return np.array(im)


def imresize(arr, size, interp="bilinear", mode=None):
    image = toimage(arr, mode=mode)
    if isinstance(size, (int, np.signedinteger)) and not isinstance(size, bool):
        size = tuple((np.array(image.size) * (size / 100.0)).astype(int))
    elif isinstance(size, (float, np.floating)):
        size = tuple((np.array(image.size) * size).astype(int))
    else:
        size = (size[1], size[0])
    if interp not in INTERP:
        raise KeyError(interp)
    return fromimage(image.resize(tuple(int(s) for s in size), resample=INTERP[interp]))


def imread(name, flatten=False, mode=None):
    return fromimage(_pil().open(name), flatten=flatten, mode=mode)


def imsave(name, arr, format=None):
    image = toimage(arr, channel_axis=2)
    if format is None:
        image.save(name)
    else:
        image.save(name, format)
