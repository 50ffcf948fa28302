"""The FCN-era V1 ``CROP`` layer (longjon's Caffe, kept by torrvision/caffe for crfasrnn and by
HyeonwooNoh/caffe for DeconvNet's FCN file), upgraded to BVLC's ``Crop`` with explicit offsets.

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

:func:`resolve_v1_crops` does the same on the upgraded layer list, so a V1 ``CROP`` becomes
``Crop { crop_param { axis: 2 offset: c_h offset: c_w } }``, which is BVLC's Crop exactly. (A V2
``type: "Crop"`` is BVLC's: with no crop_param its offset is 0, as in torrvision's crfrnn branch.)
"""
from fractions import Fraction

from ..errors import ProtoError

_IDENTITY = frozenset([
    "ReLU", "Sigmoid", "TanH", "Dropout", "Power", "AbsVal", "BNLL", "Threshold", "Exp", "Log",
    "PReLU", "ELU", "Eltwise", "Concat", "Split", "Slice", "LRN", "MVN", "Softmax"])


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


def _layer_map(layer, where):
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
        if len(p.dilation) and any(d != 1 for d in p.dilation):
            raise ProtoError("%s: V1 CROP: layer '%s' is dilated; the fork's coordinate maps have "
                             "no dilation" % (where, layer.name))
        k, s, pad = (_hw(p, "kernel_size", "kernel_h", "kernel_w", 1),
                     _hw(p, "stride", "stride_h", "stride_w", 1), _hw(p, "pad", "pad_h", "pad_w", 0))
    elif t == "Pooling":
        p = layer.pooling_param
        if p.global_pooling:
            raise ProtoError("%s: V1 CROP: global pooling '%s' has no coordinate map"
                             % (where, layer.name))
        k, s, pad = (_hw(p, "kernel_size", "kernel_h", "kernel_w", 1),
                     _hw(p, "stride", "stride_h", "stride_w", 1), _hw(p, "pad", "pad_h", "pad_w", 0))
    else:
        raise ProtoError("%s: V1 CROP: layer '%s' (%s) on the path has no coordinate map (the fork "
                         "defines one for convolution, pooling, deconvolution, crop and "
                         "element-wise layers)" % (where, layer.name, t))
    f = [(Fraction(s[i]), Fraction(k[i] - 1, 2) - pad[i]) for i in range(2)]
    if t == "Deconvolution":
        return f
    return [(1 / a, -b / a) for a, b in f]


def _compose(left, right):
    """left . right (right first)."""
    return [(la * ra, la * rb + lb) for (la, lb), (ra, rb) in zip(left, right)]


def crop_offsets(layers, index, where="<net>"):
    """(c_h, c_w) of the V1 CROP ``layers[index]`` (LayerParameters, in net order)."""
    crop = layers[index]
    if len(crop.bottom) != 2:
        raise ProtoError("%s: V1 CROP layer '%s' takes 2 bottoms, got %d"
                         % (where, crop.name, len(crop.bottom)))
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
            raise ProtoError("%s: V1 CROP layer '%s': cannot align apparently disconnected blobs "
                             "'%s' and '%s'" % (where, crop.name, crop.bottom[0], crop.bottom[1]))
        meet = layers[producer[meet]].bottom[0]
    maps = []
    for start in crop.bottom:
        m = [(Fraction(1), Fraction(0))] * 2
        blob = start
        while blob != meet:
            layer = layers[producer[blob]]
            m = _compose(m, _layer_map(layer, where))
            blob = layer.bottom[0]
        maps.append(m)
    inv0 = [(1 / a, -b / a) for a, b in maps[0]]
    out = []
    for a, b in _compose(maps[1], inv0):
        if a != 1 or b > 0 or b.denominator != 1:
            raise ProtoError("%s: V1 CROP layer '%s': the coordinate map from '%s' to '%s' is "
                             "y = %s x + %s; the fork needs scale 1 and a whole, non-positive shift"
                             % (where, crop.name, crop.bottom[0], crop.bottom[1], a, b))
        out.append(int(-b))
    return tuple(out)


def resolve_v1_crops(layers, crop_indices, where="<net>"):
    """Give each V1 CROP (by index, upgraded to type "Crop") its fork-computed crop_param."""
    for i in sorted(crop_indices):
        c_h, c_w = crop_offsets(layers, i, where)
        p = layers[i].crop_param
        p.axis = 2
        del p.offset[:]
        p.offset.extend([c_h, c_w])
