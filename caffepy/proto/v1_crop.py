"""Coordinate-map crops: the FCN-era V1 ``CROP`` layer (longjon's Caffe, kept by torrvision/caffe
for crfasrnn and by HyeonwooNoh/caffe for DeconvNet's FCN file), upgraded to BVLC's ``Crop`` with
explicit offsets, and RCF's ``AutoCrop`` (:mod:`caffepy.forks.misc.rcf`), which finds its offset
the same way when it is set up.

That fork's Crop has no parameters: at set-up it cuts bottom 0 to bottom 1's H x W at an offset
found from the net's coordinate maps. Each spatial layer maps its bottom's coordinates to its top's
affinely per axis, ``y = a x + b``; with kernel k, stride s, pad p (``f = (s, (k - 1) / 2 - p)``,
the top-to-bottom map of a filter): Convolution and Pooling map by ``f``'s inverse
``(1 / s, (p - (k - 1) / 2) / s)``, Deconvolution by ``f`` itself, an earlier Crop by
``(1, -offset)``; element-wise layers (neurons, Eltwise, Concat, Split, Slice, LRN, MVN, Softmax)
are the identity. The fork walks back from bottom 0 along first bottoms (a blob's first producer,
so in-place layers are skipped), then from bottom 1 until it meets that path, composes the maps
from the meeting blob to each bottom and takes ``m1 . m0^-1`` (bottom 0 -> bottom 1 coordinates):
it must be ``(1, -c)`` with integer c >= 0, and c is the crop offset on both H and W.

RCF's Caffe (yun-liu/rcf, ``auto_crop_layer.cpp``, ``util/coords.hpp``) keeps that walk and those
maps, with a dilated Convolution / Deconvolution mapping by its kernel extent ``d (k - 1) + 1``
(``crop_offsets(..., dilation=True)``) and an AutoCrop on the path by ``(1, -its offset)``. (Its
BVLC ``Crop`` maps by the offsets of axes 0 and 1, which are 0 for a spatial crop; here a Crop
maps by its spatial offsets, as the V1 fork's did.)

:func:`resolve_v1_crops` does the same on the upgraded layer list, so a V1 ``CROP`` becomes
``Crop { crop_param { axis: 2 offset: c_h offset: c_w } }``, which is BVLC's Crop exactly. (A V2
``type: "Crop"`` is BVLC's: with no crop_param its offset is 0, as in torrvision's crfrnn branch.)
"""
from fractions import Fraction

from ..errors import ProtoError

_IDENTITY = frozenset([
    "ReLU", "Sigmoid", "TanH", "Dropout", "Power", "AbsVal", "BNLL", "Threshold", "Exp", "Log",
    "PReLU", "ELU", "Eltwise", "Concat", "Split", "Slice", "LRN", "MVN", "Softmax"])


class CoordMapError(ValueError):
    """No crop offset: a layer on the path has no map, the blobs do not meet, or the map from
    bottom 0 to bottom 1 is not a whole non-negative shift. The caller names file and layer."""


def _hw(p, name, h_name, w_name, default):
    """(h, w) of a convolution / pooling geometry field (repeated or scalar, or its _h / _w)."""
    if p.HasField(h_name) or p.HasField(w_name):
        return int(getattr(p, h_name)), int(getattr(p, w_name))
    v = getattr(p, name)
    if hasattr(v, "__len__"):
        v = list(v)
        if not v:
            return default, default
        return int(v[0]), int(v[-1])
    return (int(v), int(v)) if p.HasField(name) else (default, default)


def _layer_map(layer, dilation):
    """[(a, b)] for H and W: this layer's bottom -> top coordinate map (exact fractions)."""
    t = layer.type
    if t in _IDENTITY:
        return [(Fraction(1), Fraction(0))] * 2
    if t == "Crop":
        off = list(layer.crop_param.offset) or [0]
        off = off * 2 if len(off) == 1 else off[-2:]
        return [(Fraction(1), Fraction(-o)) for o in off]
    if t in ("Convolution", "Deconvolution"):
        p = layer.convolution_param
        d = [int(v) for v in p.dilation] or [1]
        if not dilation and any(v != 1 for v in d):
            raise CoordMapError("layer '%s' on the path is dilated; the fork's coordinate maps "
                                "have no dilation" % layer.name)
        k, s, pad = (_hw(p, "kernel_size", "kernel_h", "kernel_w", 1),
                     _hw(p, "stride", "stride_h", "stride_w", 1), _hw(p, "pad", "pad_h", "pad_w", 0))
        k = (d[0] * (k[0] - 1) + 1, d[-1] * (k[1] - 1) + 1)
    elif t == "Pooling":
        p = layer.pooling_param
        if p.global_pooling:
            raise CoordMapError("global pooling '%s' on the path has no coordinate map" % layer.name)
        k, s, pad = (_hw(p, "kernel_size", "kernel_h", "kernel_w", 1),
                     _hw(p, "stride", "stride_h", "stride_w", 1), _hw(p, "pad", "pad_h", "pad_w", 0))
    else:
        raise CoordMapError("layer '%s' (%s) on the path has no coordinate map (the fork defines "
                            "one for convolution, pooling, deconvolution, crop and element-wise "
                            "layers)" % (layer.name, t))
    f = [(Fraction(s[i]), Fraction(k[i] - 1, 2) - pad[i]) for i in range(2)]
    if t == "Deconvolution":
        return f
    return [(1 / a, -b / a) for a, b in f]


def _compose(left, right):
    """left . right (right first)."""
    return [(la * ra, la * rb + lb) for (la, lb), (ra, rb) in zip(left, right)]


def crop_offsets(layers, index, dilation=False):
    """(c_h, c_w) of the coordinate-map crop ``layers[index]`` (LayerParameters in net order; only
    ``layers[:index + 1]`` are read). ``dilation``: dilated convolutions map by their kernel
    extent (RCF) instead of being refused (the V1 fork). Raises :class:`CoordMapError`."""
    crop = layers[index]
    if len(crop.bottom) != 2:
        raise CoordMapError("takes 2 bottoms, got %d" % len(crop.bottom))
    producer = {}
    for i, layer in enumerate(layers[:index]):
        for t in layer.top:
            producer.setdefault(t, i)
    path = {crop.bottom[0]}
    blob = crop.bottom[0]
    while blob in producer and layers[producer[blob]].bottom:
        blob = layers[producer[blob]].bottom[0]
        path.add(blob)
    meet = crop.bottom[1]
    while meet not in path:
        if meet not in producer or not layers[producer[meet]].bottom:
            raise CoordMapError("cannot align apparently disconnected blobs '%s' and '%s'"
                                % (crop.bottom[0], crop.bottom[1]))
        meet = layers[producer[meet]].bottom[0]
    maps = []
    for start in crop.bottom:
        m = [(Fraction(1), Fraction(0))] * 2
        blob = start
        while blob != meet:
            i = producer[blob]
            if layers[i].type == "AutoCrop":
                step = [(Fraction(1), Fraction(-c)) for c in crop_offsets(layers, i, dilation)]
            else:
                step = _layer_map(layers[i], dilation)
            m = _compose(m, step)
            blob = layers[i].bottom[0]
        maps.append(m)
    inv0 = [(1 / a, -b / a) for a, b in maps[0]]
    out = []
    for a, b in _compose(maps[1], inv0):
        if a != 1 or b > 0 or b.denominator != 1:
            raise CoordMapError("the coordinate map from '%s' to '%s' is y = %s x + %s; the fork "
                                "needs scale 1 and a whole, non-positive shift"
                                % (crop.bottom[0], crop.bottom[1], a, b))
        out.append(int(-b))
    return tuple(out)


def resolve_v1_crops(layers, crop_indices, where="<net>"):
    """Give each V1 CROP (by index, upgraded to type "Crop") its fork-computed crop_param."""
    for i in sorted(crop_indices):
        try:
            c_h, c_w = crop_offsets(layers, i)
        except CoordMapError as e:
            raise ProtoError("%s: V1 CROP layer '%s': %s" % (where, layers[i].name, e))
        p = layers[i].crop_param
        p.axis = 2
        del p.offset[:]
        p.offset.extend([c_h, c_w])
