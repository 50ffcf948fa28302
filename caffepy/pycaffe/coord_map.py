"""Coordinate mapping between NetSpec tops, and the Crop layer it makes (pycaffe's coord_map).

Spatial layers map input coordinates to output coordinates affinely, per spatial axis:
``y = a * x + b``. Convolution / Pooling / Im2col with stride s, kernel k (dilation d: extent
``(k - 1) * d + 1``) and pad p give ``a = 1 / s``, ``b = (p - (extent - 1) / 2) / s``;
Deconvolution the inverse map ``a = s``, ``b = (extent - 1) / 2 - p``; Crop at offset o
``a = 1``, ``b = -o``; element-wise layers the identity. ``coord_map_from_to(top_from, top_to)``
walks both tops back to a common ancestor and returns ``(axis, a, b)`` mapping coordinates of
``top_from`` to those of ``top_to``; ``crop(top_from, top_to)`` makes the Crop layer that cuts
``top_from`` to ``top_to``'s spatial extent (FCN's score crop).
"""
import numpy as np

from ..netspec import layers as L

PASS_THROUGH_LAYERS = frozenset([
    "AbsVal", "BatchNorm", "Bias", "BNLL", "Dropout", "Eltwise", "ELU", "Log", "LRN", "Exp", "MVN",
    "Power", "ReLU", "PReLU", "Scale", "Sigmoid", "Split", "TanH", "Threshold", "Clip", "Swish"])


class UndefinedMapException(Exception):
    """The layer does not map coordinates (InnerProduct, Reshape, ...)."""


class AxisMismatchException(Exception):
    """Two maps on different starting axes cannot be composed."""


class CropError(AssertionError):
    """A crop that cannot be made (pycaffe raises AssertionError; this is a real exception)."""


def _conv_params(fn):
    params = fn.params.get("convolution_param", fn.params)
    legacy = {"pad_h", "pad_w", "kernel_h", "kernel_w", "stride_h", "stride_w"} & set(params)
    if legacy:
        raise UndefinedMapException("%s: coord_map does not support the legacy %s fields"
                                    % (fn.type_name, ", ".join(sorted(legacy))))
    axis = params.get("axis", 1)
    ks = np.array(params.get("kernel_size", 1), ndmin=1)
    dilation = np.array(params.get("dilation", 1), ndmin=1)
    stride = np.array(params.get("stride", 1), ndmin=1)
    pad = np.array(params.get("pad", 0), ndmin=1)
    return axis, stride, (ks - 1) * dilation + 1, pad


def _pool_params(fn):
    params = fn.params.get("pooling_param", fn.params)
    ks = np.array(params.get("kernel_size", 1), ndmin=1)
    return 1, np.array(params.get("stride", 1), ndmin=1), ks, np.array(params.get("pad", 0), ndmin=1)


def coord_map(fn):
    """(axis, a, b) of one layer: top coordinates = a * bottom coordinates + b."""
    if fn.type_name in ("Convolution", "Im2col", "Pooling"):
        axis, stride, extent, pad = (_pool_params if fn.type_name == "Pooling" else _conv_params)(fn)
        return axis, 1.0 / stride, (pad - (extent - 1) / 2.0) / stride
    if fn.type_name == "Deconvolution":
        axis, stride, extent, pad = _conv_params(fn)
        return axis, stride.astype(float), (extent - 1) / 2.0 - pad
    if fn.type_name in PASS_THROUGH_LAYERS:
        return None, 1, 0
    if fn.type_name == "Crop":
        params = fn.params.get("crop_param", fn.params)
        axis = params.get("axis", 2)
        offset = np.array(params.get("offset", 0), ndmin=1)
        return axis - 1, 1, -offset
    raise UndefinedMapException(fn.type_name)


def compose(base_map, next_map):
    """The map ``base ∘ next``: x -> a1 * (a2 * x + b2) + b1."""
    ax1, a1, b1 = base_map
    ax2, a2, b2 = next_map
    if ax1 is None:
        ax = ax2
    elif ax2 is None or ax1 == ax2:
        ax = ax1
    else:
        raise AxisMismatchException("cannot compose maps on axes %s and %s" % (ax1, ax2))
    return ax, a1 * a2, a1 * b2 + b1


def inverse(cmap):
    ax, a, b = cmap
    return ax, 1.0 / a, -b / a


def _bottoms(top):
    inputs = top.fn.inputs
    return inputs[:1] if top.fn.type_name == "Crop" else inputs


def _walk(start):
    """{ancestor top: map from ancestor coordinates to ``start`` coordinates}."""
    maps = {start: (None, 1, 0)}
    frontier = [start]
    while frontier:
        top = frontier.pop()
        try:
            step = coord_map(top.fn)
        except UndefinedMapException:
            continue
        for bottom in _bottoms(top):
            if bottom not in maps:
                maps[bottom] = compose(maps[top], step)
                frontier.append(bottom)
    return maps


def coord_map_from_to(top_from, top_to):
    """(axis, a, b) mapping coordinates of ``top_from`` to coordinates of ``top_to``.

    Raises RuntimeError when no chain of spatial layers connects them.
    """
    from_maps = _walk(top_from)
    to_maps = _walk(top_to)
    for top, to_map in to_maps.items():
        if top in from_maps:
            return compose(to_map, inverse(from_maps[top]))
    raise RuntimeError("coord_map: could not compute a map between the tops; are they connected "
                       "by spatial layers?")


def crop(top_from, top_to):
    """A Crop layer cutting ``top_from`` to the extent of ``top_to`` (offsets from the maps)."""
    ax, a, b = coord_map_from_to(top_from, top_to)
    a, b = np.array(a, ndmin=1, dtype=float), np.array(b, ndmin=1, dtype=float)
    if not (a == 1).all():
        raise CropError("crop: scale mismatch between the tops (a = %s)" % a)
    if not (b <= 0).all():
        raise CropError("crop: cannot crop a negative offset (b = %s)" % b)
    if not (np.round(b) == b).all():
        raise CropError("crop: cannot crop a non-integer offset (b = %s)" % b)
    offset = [int(v) for v in -np.round(b)]
    return L.Crop(top_from, top_to, crop_param=dict(axis=ax + 1, offset=offset))
