"""The shapes of the open tops of replaced data layers, learned from the layers that read them.

:func:`caffepy.zoo.replace_data_layers` shapes a reader's tops after the image by their names:
label vectors (N,) unless a name or the reader's type says otherwise. A top is *open*
(:func:`open_tops`) when its data layer reads it from a source whose shapes the file does not
state as such (not Input, DummyData or MemoryData): LMDB / LevelDB ``Data``, ``ImageData``, a
Python data layer that caffepy.zoo.readers replaces, the fork readers; every top of an
``HDF5Data`` is open (an HDF5 file holds any shapes), less the blobs given with ``--input``.
While caffepy.zoo.input_search builds a candidate, an open top takes the shape its readers need:

* **Slice** (:func:`slice_shapes`, before each build), for a Slice whose bottom is an open top:
  on an axis past a label vector's batch axis (axis >= 1, or a negative axis, which the file
  means from the end of a label with more axes) the label becomes (N, K), or (N, 1, ..., K) as
  far as the slice axis needs (axis -2: (N, K, 1)); on an axis of the top whose size the last
  slice point reaches or passes, that size is widened to K. K is the last slice point plus the
  width of the other slices when there are several, all equally wide (3, 6, 9: 12, four frames
  of 3 channels; 1, 2: 3), else plus 1 (4: 5; 10, 11, 12: 13); without slice points the number
  of tops (each 1 wide), also on an axis of the top whose size the tops do not divide (an image
  of five RGB frames cut into 15 channels).
* **Images** (:func:`image_shapes`, before each build): a top after the first that a
  convolution, pooling or LRN reads has the shape of its reader's first top (a triplet reader's
  ``data_p`` and ``data_n`` beside ``data_a``); a top after the first that a Permute reads takes
  its reader's first top's shape once that has the axes the Permute's order needs (the target
  frames beside the input frames of a sequence reader; again after each learned shape).
* **Label layouts** (:data:`LABEL_LAYOUTS`): maps of the image's size, its channels, or 1/2, 1/4,
  1/8 of it instead of label vectors, tried as candidates of their own at the first sizes; and
  rows (N, C) instead of images for the searched tops of HDF5Data layers (:func:`hdf5_rows`),
  tried second.
* **From the layer that rejects it** and **axes**: :mod:`caffepy.zoo.learn_shapes`.

These rules are the search's only: a data layer that is built keeps the shapes Caffe gives its
tops (``Data``'s label is (N,)).
"""
from . import declared_label_width, is_data_layer, replace_data_layers

DECLARED_SHAPES = ("Input", "DummyData", "MemoryData")

#: How a reader's other tops may be laid out when the guess (a label vector N) fits nothing:
#: a map of the image's size (super-resolution targets, segmentation labels), of its size and
#: channels, or a map at 1/2, 1/4, 1/8 of it (density maps). Tried at the first sizes.
LABEL_LAYOUTS = (("map", "label maps of the image's size"), ("image", "label maps like the image"),
                 (2, "label maps at 1/2"), (4, "label maps at 1/4"), (8, "label maps at 1/8"))
LABEL_MAP_SIZES = 12


def open_tops(net_param):
    """Tops of the data layers that read their blobs from a source (see the module doc); not the
    labels of a reader that states their width (``label_size``)."""
    return {t for lp in net_param.layer if is_data_layer(lp) and lp.type not in DECLARED_SHAPES
            for i, t in enumerate(lp.top)
            if not (i and lp.type in ("Data", "ImageData") and declared_label_width(lp))}


def label_tops(net_param, searched, fixed):
    """Other tops of the searched data layers that ``replace_data_layers`` makes label vectors."""
    replaced = replace_data_layers(net_param, guess=False)
    out = []
    for lo, lr in zip(net_param.layer, replaced.layer):
        if not is_data_layer(lo) or lr.type != "Input":
            continue
        alone = len(lr.top) == 1 and len(lr.input_param.shape) == 1 and \
            len(lr.input_param.shape[0].dim) == 1
        if not alone and not any(t in searched for t in lr.top):
            continue
        # a reader's other tops made label vectors, and a reader of labels alone (a second
        # Data layer whose one top is named a label)
        out += [t for k, (t, sh) in enumerate(zip(lr.top, lr.input_param.shape))
                if (k or alone) and len(sh.dim) == 1 and t not in fixed]
    return out


def lay_out_labels(param, labels, layout):
    """Give the ``labels`` of ``param``'s Input layers the shape ``layout`` names, after the
    image of their own reader, or of the first reader with one when they are read alone."""
    images = [list(sh.dim) for lp in param.layer if lp.type == "Input"
              for sh in lp.input_param.shape[:1] if len(sh.dim) == 4]
    for lp in param.layer:
        if lp.type != "Input" or not any(t in labels for t in lp.top):
            continue
        image = list(lp.input_param.shape[0].dim)
        if len(image) != 4:             # a reader of labels alone: the image of another reader
            if not images:
                continue
            image = images[0]
        n, c, h, w = image
        for t, shape in zip(lp.top, lp.input_param.shape):
            if t not in labels:
                continue
            if layout == "image":
                dims = [n, c, h, w]
            elif layout == "map":
                dims = [n, 1, h, w]
            else:
                dims = [n, 1, max(h // layout, 1), max(w // layout, 1)]
            del shape.dim[:]
            shape.dim.extend(dims)


def input_shapes(param, top):
    """The input_param shape messages of ``param``'s Input layers that give ``top`` (one per
    phase)."""
    return [lp.input_param.shape[k] for lp in param.layer if lp.type == "Input"
            for k, t in enumerate(lp.top) if t == top and k < len(lp.input_param.shape)]


def give(param, top, shape):
    """Give ``top`` ``shape`` in every Input layer of ``param`` that has it; whether any
    changed."""
    changed = False
    for sh in input_shapes(param, top):
        if list(sh.dim) != list(shape):
            del sh.dim[:]
            sh.dim.extend(int(d) for d in shape)
            changed = True
    return changed


def shape_text(shape):
    return " x ".join(str(d) for d in shape) or "scalar"


def slice_axis(lp):
    p = lp.slice_param
    return int(p.slice_dim) if p.HasField("slice_dim") else int(p.axis)


def slice_width(lp):
    """K, the size a Slice ``lp`` cuts (module doc): the last slice point plus the width of the
    other slices when they are all equally wide (3, 6, 9: four slices of 3), else plus 1; the
    number of tops without slice points."""
    points = [int(x) for x in lp.slice_param.slice_point]
    if not points:
        return len(lp.top)
    steps = {b - a for a, b in zip([0] + points, points)}
    return points[-1] + (steps.pop() if len(points) > 1 and len(steps) == 1 else 1)


def sliced_shape(shape, lp):
    """The shape an open top of ``shape`` needs for the Slice ``lp`` (module doc), or None when
    it fits as it is (or no rule applies)."""
    axis, width = slice_axis(lp), slice_width(lp)
    points = [int(x) for x in lp.slice_param.slice_point]
    shape, n = list(shape), len(shape)
    if n == 1 and axis < 0:
        return shape + [width] + [1] * (-axis - 1)
    if 0 < n <= axis:
        return shape + [1] * (axis - n) + [width]
    at = axis + n if axis < 0 else axis
    if n and 0 < at < n and points and points[-1] >= shape[at]:
        shape[at] = width
        return shape
    if n and 0 < at < n and not points and shape[at] % len(lp.top):
        shape[at] = width                     # equal parts, one per top: each 1 wide
        return shape
    return None


def _image_bottoms(lp):
    """The bottoms ``lp`` reads as images: every bottom of a convolution (shared weights over
    several), the first of a pooling or LRN."""
    low = lp.type.lower()
    if "conv" in low:
        return list(lp.bottom)
    return list(lp.bottom[:1]) if "pool" in low or low == "lrn" else []


def image_shapes(param, opened, permuted_only=False):
    """Give each open top after the first of its reader that a convolution, pooling or LRN reads
    the shape of that reader's first top when it has fewer axes (a pair or triplet reader's
    second and third images), and each that a Permute reads that shape when it has the axes the
    Permute needs (the targets beside a sequence of frames), in place; ``permuted_only``: the
    latter only. [(top, what was done)]."""
    done = []
    images = {b for lp in param.layer for b in _image_bottoms(lp) if b in opened}
    permuted = {lp.bottom[0]: max(int(a) for a in lp.permute_param.order) + 1
                for lp in param.layer if lp.type == "Permute" and len(lp.bottom) == 1
                and lp.bottom[0] in opened and len(lp.permute_param.order)}
    for lp in param.layer:
        if lp.type != "Input" or len(lp.input_param.shape) < 2:
            continue
        first = list(lp.input_param.shape[0].dim)
        for top, sh in zip(lp.top[1:], lp.input_param.shape[1:]):
            if top in images and len(first) >= 4 and len(sh.dim) < len(first) and \
                    not permuted_only:
                del sh.dim[:]
                sh.dim.extend(first)
                done.append((top, "%s given the shape of %s (an image: a convolution or "
                                  "pooling reads it)" % (top, lp.top[0])))
            elif top in permuted and len(first) >= max(permuted[top], 4) and \
                    list(sh.dim) != first:
                del sh.dim[:]
                sh.dim.extend(first)
                done.append((top, "%s given the shape of %s (a sequence of frames beside it: a "
                                  "Permute reads it)" % (top, lp.top[0])))
    return list(dict.fromkeys(done))


def hdf5_rows(net_param, searched):
    """The searched tops of HDF5Data layers: an HDF5 file may hold rows of values (N, C) where
    the search assumes images."""
    return [t for lp in net_param.layer if lp.type == "HDF5Data" for t in lp.top if t in searched]


def as_rows(param, tops):
    """Give the ``tops`` of ``param``'s Input layers the shape (N, C) of their (N, C, ...)."""
    for top in tops:
        for sh in input_shapes(param, top):
            dims = list(sh.dim)[:2]
            del sh.dim[:]
            sh.dim.extend(dims)


def slice_shapes(param, opened):
    """Give each open top that a Slice reads the shape that Slice needs (module doc), in place;
    [(top, what was done)]."""
    done = []
    for lp in param.layer:
        if lp.type != "Slice" or len(lp.bottom) != 1 or lp.bottom[0] not in opened:
            continue
        top = lp.bottom[0]
        for sh in input_shapes(param, top):
            new = sliced_shape(list(sh.dim), lp)
            if new is not None and new != list(sh.dim):
                del sh.dim[:]
                sh.dim.extend(new)
                done.append((top, "%s given the shape %s that Slice layer '%s' needs"
                             % (top, shape_text(["N"] + new[1:]), lp.name)))
    return list(dict.fromkeys(done))          # one per top and Slice, however many phases
