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
* **From the layer that rejects it** (:func:`learn`, after a failed build, at most
  :data:`MAX_LEARN` times per candidate): a layer's ShapeError lists in ``fits`` the (bottom,
  shape) with which its check passes (``caffepy.layers.base.Layer.needs``); the first such
  bottom that is an open top takes that shape and the candidate is built again. A top of a
  Permute of an open top passes the shape on with the order undone (for a Reshape, which needs
  only the count, size-1 axes beyond the order's length are dropped: frames N x T x H x W
  permuted and reshaped to T x N x 1 x H x W). A top of a Slice
  of an open top passes the shape on: the open top takes it, but keeps its size on the slice
  axis, or, for the last top, the last slice point plus the width it must have (an HDF5 row
  of 5 values cut at 4 into inputs and the target a loss compares with a prediction of 1:
  (N, 5); a label cut at 3, 6, 9 whose last part is a class label: (N, 10)). So two bottoms
  that must be equal (Eltwise, EuclideanLoss, SigmoidCrossEntropyLoss, a fork's regression loss)
  give the open one the other's shape (a super-resolution net's bicubic input takes the shape of
  its upsampled output, a density map the prediction's); a loss's label takes the prediction's
  first dimension; SoftmaxWithLoss and Accuracy give one label per prediction position
  ((N, 1, H, W) for a map, (N,) for a vector); LSTM / RNN give ``cont`` the (T, N) of their
  input and a static input (N, D); SmoothL1Loss's weights the prediction's shape; a Concat
  gives a bottom the other's shape off the concat axis (a second frame beside the image); a
  Reshape of explicit dims its output shape (a label reshaped to 0 x 1 x 49 x 1); ROIPooling's
  rois (R, 5). The bottom may also be made from the open top through layers that keep its
  shape (:func:`open_source`: element-wise activations, BatchNorm, Scale, Dropout ...), through
  an Embed (the fitted shape less its last axis), or be its Flatten (:func:`_through_flatten`:
  a fitted (N, K) keeps the top's H x W when they divide K, else puts K in its channels).
* **Axes** (:func:`learn`, likewise): a layer that reads a bottom along an axis it does not
  have (``axes_needed`` of the error: a Tile, Concat, Scale or InnerProduct along axis 1 of a
  label vector) gives the open top that bottom comes from trailing 1s, (N,) -> (N, 1), in each
  phase's Input with its own batch.

These rules are the search's only: a data layer that is built keeps the shapes Caffe gives its
tops (``Data``'s label is (N,)).
"""
import numpy as np

from . import declared_label_width, is_data_layer, replace_data_layers

MAX_LEARN = 8
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


def _input_shapes(param, top):
    """The input_param shape messages of ``param``'s Input layers that give ``top`` (one per
    phase)."""
    return [lp.input_param.shape[k] for lp in param.layer if lp.type == "Input"
            for k, t in enumerate(lp.top) if t == top and k < len(lp.input_param.shape)]


def _give(param, top, shape):
    """Give ``top`` ``shape`` in every Input layer of ``param`` that has it; whether any
    changed."""
    changed = False
    for sh in _input_shapes(param, top):
        if list(sh.dim) != list(shape):
            del sh.dim[:]
            sh.dim.extend(int(d) for d in shape)
            changed = True
    return changed


def _shape_text(shape):
    return " x ".join(str(d) for d in shape) or "scalar"


def _slice_axis(lp):
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
    axis, width = _slice_axis(lp), slice_width(lp)
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


def _through_slice(param, blob, shape, opened):
    """(open top, its shape, Slice name) when ``blob`` is a top of a Slice whose bottom is in
    ``opened`` and ``blob`` must have ``shape``: the open top takes that shape but on the slice
    axis, where its size is the last slice point plus the width ``shape`` gives the last top
    when ``blob`` is that top, else the size it has (or the Slice's K); else None."""
    for lp in param.layer:
        if lp.type != "Slice" or blob not in lp.top or len(lp.bottom) != 1 or \
                lp.bottom[0] not in opened:
            continue
        axis, wanted = _slice_axis(lp), list(shape)
        at = axis + len(wanted) if axis < 0 else axis
        if at < 0 or (at == 0 and axis < 0):
            return None
        points = [int(x) for x in lp.slice_param.slice_point]
        if points and blob == lp.top[-1]:
            size = points[-1] + (wanted[at] if at < len(wanted) else 1)
        else:
            now = [list(sh.dim) for sh in _input_shapes(param, lp.bottom[0])][:1]
            k = axis + len(now[0]) if now and axis < 0 else axis
            size = now[0][k] if now and 0 <= k < len(now[0]) else slice_width(lp)
        if at >= len(wanted):
            wanted += [1] * (at - len(wanted)) + [size]
        else:
            wanted[at] = size
        return lp.bottom[0], wanted, lp.name
    return None


def _through_permute(param, blob, shape, opened, count_only):
    """(open top, its shape, Permute name) when ``blob`` is the top of a Permute whose bottom is
    in ``opened`` and ``blob`` must have ``shape``: the open top takes ``shape`` with the
    Permute's order undone. When only the count matters (``count_only``: a Reshape's needs) and
    ``shape`` has more axes than the order names, its size-1 axes are dropped, last first, down
    to that many (an HDF5 sequence of N x T x H x W frames permuted to T x N x H x W and
    reshaped to T x N x 1 x H x W); else None."""
    for lp in param.layer:
        if lp.type != "Permute" or list(lp.top) != [blob] or len(lp.bottom) != 1 or \
                lp.bottom[0] not in opened:
            continue
        order = [int(a) for a in lp.permute_param.order]
        wanted = list(shape)
        while count_only and len(wanted) > len(order) and 1 in wanted:
            del wanted[len(wanted) - 1 - wanted[::-1].index(1)]
        if len(order) > len(wanted) or sorted(order) != list(range(len(order))):
            return None
        order += list(range(len(order), len(wanted)))
        back = [0] * len(wanted)
        for i, a in enumerate(order):
            back[a] = wanted[i]
        return lp.bottom[0], back, lp.name
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
        for sh in _input_shapes(param, top):
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
        for sh in _input_shapes(param, top):
            new = sliced_shape(list(sh.dim), lp)
            if new is not None and new != list(sh.dim):
                del sh.dim[:]
                sh.dim.extend(new)
                done.append((top, "%s given the shape %s that Slice layer '%s' needs"
                             % (top, _shape_text(["N"] + new[1:]), lp.name)))
    return list(dict.fromkeys(done))          # one per top and Slice, however many phases


#: Types whose top has the shape of their (first) bottom, besides caffepy's NeuronLayer
#: subclasses: a shape an open top must have reaches it through them unchanged.
SAME_SHAPE_TYPES = frozenset(["BatchNorm", "Scale", "Bias", "MVN", "LRN", "Dropout", "Split",
                              "Normalize", "PReLU", "Softmax"])


def _same_shape(lp):
    """Whether ``lp`` gives its (one) top the shape of its first bottom."""
    from ..layers.base import NeuronLayer, get_layer_class, has_layer_type
    if len(lp.top) != 1 or not len(lp.bottom):
        return False
    if lp.type in SAME_SHAPE_TYPES:
        return lp.type not in ("Scale", "Bias") or len(lp.bottom) == 1
    return has_layer_type(lp.type) and len(lp.bottom) == 1 and \
        issubclass(get_layer_class(lp.type), NeuronLayer)


def open_source(param, blob, opened, before=None, embed=False):
    """The open top whose shape ``blob`` has: ``blob`` itself when it is in ``opened``, else the
    open top it is made from through layers that keep their bottom's shape (element-wise
    activations, BatchNorm, Scale, Dropout, ...), else None. ``before``: the name of the layer
    reading ``blob`` (only layers before it can make it). ``embed``: Embed layers (which add an
    axis) are passed too, and (open top, the number of them passed) is returned."""
    layers = list(param.layer)
    end = next((k for k, lp in enumerate(layers) if lp.name == before), len(layers))
    seen, added = set(), 0
    while blob not in opened:
        if blob in seen:
            return (None, 0) if embed else None
        seen.add(blob)
        makers = [lp for lp in layers[:end] if blob in lp.top and blob not in lp.bottom]
        embeds = embed and makers and all(lp.type == "Embed" and len(lp.bottom) == 1
                                          for lp in makers)
        if not makers or not (embeds or all(_same_shape(lp) for lp in makers)):
            return (None, 0) if embed else None
        added += 1 if embeds else 0
        end = max(k for k, lp in enumerate(layers[:end]) if lp is makers[-1])
        blob = makers[-1].bottom[0]
    return (blob, added) if embed else blob


def _through_flatten(param, blob, shape, opened, before):
    """(open top, shape) when ``blob`` is the Flatten (from axis 1) of an open top and must be
    (N, K): the open top keeps its size and takes K / (H W) channels when that divides, else
    holds the K values in its channels, (N, K, 1, 1) (an LMDB of feature vectors read by an
    autoencoder); else None."""
    if len(shape) != 2:
        return None
    layers = list(param.layer)
    end = next((k for k, lp in enumerate(layers) if lp.name == before), len(layers))
    makers = [lp for lp in layers[:end] if blob in lp.top and lp.type == "Flatten"
              and len(lp.bottom) == 1 and lp.flatten_param.axis == 1
              and lp.flatten_param.end_axis == -1]
    if not makers:
        return None
    top = open_source(param, makers[-1].bottom[0], opened, makers[-1].name)
    now = [list(sh.dim) for sh in _input_shapes(param, top)][:1] if top else []
    if not now or len(now[0]) < 2:
        return None
    rest = int(np.prod(now[0][2:])) if len(now[0]) > 2 else 1
    if shape[1] % rest == 0:                  # its size kept, the channels make up K
        return top, [shape[0], shape[1] // rest] + now[0][2:]
    return top, [shape[0], shape[1]] + [1] * (len(now[0]) - 2)


def _pad_axes(param, error, opened):
    """For an error whose ``axes_needed`` says a bottom has too few axes for the layer's axis
    (a label vector (N,) that a Tile, Concat, Scale or InnerProduct reads along axis 1): the
    first bottom of the layer made from an open top with fewer axes gets trailing 1s
    ((N,) -> (N, 1)); (top, what was done), else None."""
    need, name = getattr(error, "axes_needed", None), getattr(error, "layer_name", None)
    if not need or name is None:
        return None
    for lp in param.layer:
        if lp.name != name:
            continue
        for b in lp.bottom:
            top, added = open_source(param, b, opened, lp.name, embed=True)
            shape = None
            for sh in _input_shapes(param, top) if top else []:
                if 0 < len(sh.dim) < need - added:     # each phase's Input keeps its batch
                    sh.dim.extend([1] * (need - added - len(sh.dim)))
                    shape = list(sh.dim)
            if shape is not None:
                via = "" if top == b else " for %s" % b
                return top, "%s given the shape %s: layer '%s' (%s) reads it along axis %d%s" % (
                    top, _shape_text(["N"] + shape[1:]), name, lp.type, need - 1, via + (
                        " (through an Embed)" if added else ""))
    return None


def learn(param, error, opened):
    """When ``error`` (a ShapeError) lists shapes with which its layer's check passes (``fits``,
    see the module doc) for a bottom that is in ``opened``, or a top of a Slice of one, or made
    from one through layers that keep its shape: give that top the shape in ``param`` (in
    place) and return (top, what was done), else None. When it says a bottom has too few axes
    (``axes_needed``), the open top it comes from gets trailing 1s."""
    fits, name = getattr(error, "fits", None), getattr(error, "layer_name", None)
    if not fits or name is None:
        return _pad_axes(param, error, opened)
    for lp in param.layer:
        if lp.name != name:
            continue
        bottoms = list(lp.bottom)
        for i, shape, like in fits:
            if i >= len(bottoms) or not len(shape):
                continue
            if like is not None and (like >= len(bottoms) or bottoms[like] == bottoms[i]):
                continue
            top, via = bottoms[i], ""
            if top not in opened:
                sliced = _through_slice(param, top, shape, opened)
                source, added = open_source(param, top, opened, name, embed=True)
                permuted = None if sliced is not None else \
                    _through_permute(param, top, shape, opened, lp.type == "Reshape")
                if sliced is not None:
                    top, shape, slicer = sliced
                    via = " for %s (through Slice layer '%s')" % (bottoms[i], slicer)
                elif permuted is not None:
                    top, shape, slicer = permuted
                    via = " for %s (through Permute layer '%s')" % (bottoms[i], slicer)
                elif source is not None and len(shape) > added:
                    top, shape = source, shape[:len(shape) - added]
                    via = " for %s (%s)" % (bottoms[i], "through an Embed" if added
                                            else "which has its shape")
                elif _through_flatten(param, top, shape, opened, name) is not None:
                    top, shape = _through_flatten(param, top, shape, opened, name)
                    via = " for %s (through a Flatten: the values in the channels)" % bottoms[i]
                else:
                    continue
            if not _give(param, top, shape):
                continue
            if like is not None and not via:
                return top, "%s given the shape of %s" % (top, bottoms[like])
            return top, "%s given the shape %s that layer '%s' (%s) needs%s" % (
                top, _shape_text(shape), name, lp.type, via)
    return None
