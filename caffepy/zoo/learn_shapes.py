"""How the input-size search learns an open top's shape from the layer that rejects it (the open
tops, and the shapes given before each build: :mod:`caffepy.zoo.label_shapes`).

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
  rois (R, 5); a Crop's reference with other axes than the blob it crops that blob's shape (a
  side output cropped to a label map at half the image's size). The bottom may also be made
  from the open top through layers that keep its shape (:func:`open_source`: element-wise
  activations, BatchNorm, Scale, Dropout ...), through an Embed (the fitted shape less its last
  axis), or be its Flatten (:func:`_through_flatten`: a fitted (N, K) keeps the top's H x W
  when they divide K, else puts K in its channels).
* **Axes** (:func:`learn`, likewise): a layer that reads a bottom along an axis it does not
  have (``axes_needed`` of the error: a Tile, Concat, Scale or InnerProduct along axis 1 of a
  label vector) gives the open top that bottom comes from trailing 1s, (N,) -> (N, 1), in each
  phase's Input with its own batch. A layer that resizes a map (``needs_map`` of the error:
  Interp) makes a label vector a map of its reader's image size instead,
  (N,) -> (N, 1, H, W): DeepLab's ``label_shrink`` Interp of a segmentation label.
"""
import numpy as np

from .label_shapes import give, input_shapes, shape_text, slice_axis, slice_width

MAX_LEARN = 8


def _through_slice(param, blob, shape, opened):
    """(open top, its shape, Slice name) when ``blob`` is a top of a Slice whose bottom is in
    ``opened`` and ``blob`` must have ``shape``: the open top takes that shape but on the slice
    axis, where its size is the last slice point plus the width ``shape`` gives the last top
    when ``blob`` is that top, else the size it has (or the Slice's K); else None."""
    for lp in param.layer:
        if lp.type != "Slice" or blob not in lp.top or len(lp.bottom) != 1 or \
                lp.bottom[0] not in opened:
            continue
        axis, wanted = slice_axis(lp), list(shape)
        at = axis + len(wanted) if axis < 0 else axis
        if at < 0 or (at == 0 and axis < 0):
            return None
        points = [int(x) for x in lp.slice_param.slice_point]
        if points and blob == lp.top[-1]:
            size = points[-1] + (wanted[at] if at < len(wanted) else 1)
        else:
            now = [list(sh.dim) for sh in input_shapes(param, lp.bottom[0])][:1]
            k = axis + len(now[0]) if now and axis < 0 else axis
            size = now[0][k] if now and 0 <= k < len(now[0]) else slice_width(lp)
        if at >= len(wanted):
            wanted += [1] * (at - len(wanted)) + [size]
        else:
            wanted[at] = size
        return lp.bottom[0], wanted, lp.name
    return None


#: The layers that permute axes, and their parameter: SSD's Permute (orders it does not name keep
#: their place) and the point-cloud forks' TensorTranspose (one order per axis).
_PERMUTES = {"Permute": "permute_param", "TensorTranspose": "tensor_transpose_param"}


def _through_permute(param, blob, shape, opened, count_only):
    """(open top, its shape, Permute name) when ``blob`` is the top of a Permute (or a
    TensorTranspose) whose bottom is in ``opened`` and ``blob`` must have ``shape``: the open top
    takes ``shape`` with the order undone. When only the count matters (``count_only``: a
    Reshape's needs) and ``shape`` has more axes than the order names, its size-1 axes are
    dropped, last first, down to that many (an HDF5 sequence of N x T x H x W frames permuted
    to T x N x H x W and reshaped to T x N x 1 x H x W); else None."""
    for lp in param.layer:
        if lp.type not in _PERMUTES or list(lp.top) != [blob] or len(lp.bottom) != 1 or \
                lp.bottom[0] not in opened:
            continue
        order = [int(a) for a in getattr(lp, _PERMUTES[lp.type]).order]
        wanted = list(shape)
        while count_only and len(wanted) > len(order) and 1 in wanted:
            del wanted[len(wanted) - 1 - wanted[::-1].index(1)]
        if len(order) > len(wanted) or sorted(order) != list(range(len(order))) or \
                (lp.type == "TensorTranspose" and len(order) != len(wanted)):
            return None
        order += list(range(len(order), len(wanted)))
        back = [0] * len(wanted)
        for i, a in enumerate(order):
            back[a] = wanted[i]
        return lp.bottom[0], back, lp.name
    return None


def _layer_type(param, name):
    return next((lp.type for lp in param.layer if lp.name == name), "?")


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
    now = [list(sh.dim) for sh in input_shapes(param, top)][:1] if top else []
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
            image = _reader_image(param, top) if top and need == 4 and not added and \
                getattr(error, "needs_map", False) else None
            for sh in input_shapes(param, top) if top else []:
                if 0 < len(sh.dim) < need - added:     # each phase's Input keeps its batch
                    if image is not None and len(sh.dim) == 1:
                        sh.dim.extend([1] + image[2:])
                    else:
                        sh.dim.extend([1] * (need - added - len(sh.dim)))
                    shape = list(sh.dim)
            if shape is not None:
                via = "" if top == b else " for %s" % b
                how = ("needs a map (a label map of its reader's image size)"
                       if image is not None else "reads it along axis %d" % (need - 1))
                return top, "%s given the shape %s: layer '%s' (%s) %s%s" % (
                    top, shape_text(["N"] + shape[1:]), name, lp.type, how, via + (
                        " (through an Embed)" if added else ""))
    return None


def _reader_image(param, top):
    """The shape of the first top of the Input layer that gives ``top`` (its reader's image)
    when that has 4 axes and is not ``top`` itself, else None."""
    for lp in param.layer:
        if lp.type == "Input" and top in lp.top and lp.top[0] != top and lp.input_param.shape:
            image = list(lp.input_param.shape[0].dim)
            if len(image) == 4:
                return image
    return None


def _drops_axes(param, bottoms, fit):
    """Whether ``fit`` (bottom index, shape, like) would give an open top fewer axes than it has:
    such fits come last, so that of two open bottoms a check compares (a tri-map beside the image
    of one HDF5 file, both read by a Concat) the guessed label vector takes the image's axes,
    not the image the vector's."""
    i, shape = fit[0], fit[1]
    now = [len(sh.dim) for sh in input_shapes(param, bottoms[i])] if i < len(bottoms) else []
    return bool(now) and len(shape) < now[0]


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
        for i, shape, like in sorted(fits, key=lambda f: _drops_axes(param, bottoms, f)):
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
                    via = " for %s (through %s layer '%s')" % (bottoms[i], _layer_type(
                        param, slicer), slicer)
                elif source is not None and len(shape) > added:
                    top, shape = source, shape[:len(shape) - added]
                    via = " for %s (%s)" % (bottoms[i], "through an Embed" if added
                                            else "which has its shape")
                elif _through_flatten(param, top, shape, opened, name) is not None:
                    top, shape = _through_flatten(param, top, shape, opened, name)
                    via = " for %s (through a Flatten: the values in the channels)" % bottoms[i]
                else:
                    continue
            if not give(param, top, shape):
                continue
            if like is not None and not via:
                return top, "%s given the shape of %s" % (top, bottoms[like])
            return top, "%s given the shape %s that layer '%s' (%s) needs%s" % (
                top, shape_text(shape), name, lp.type, via)
    return None
