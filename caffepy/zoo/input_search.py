"""Input sizes a net file leaves undeclared, found by search.

A data layer whose file gives no size for its images (an LMDB read without ``crop_size`` or
``new_height`` / ``new_width``, a reader whose size only the data knows) gets an Input layer of a
default size from :func:`caffepy.zoo.replace_data_layers`; nets whose Concat / Eltwise / Crop /
InnerProduct only line up at the size their authors trained with then fail to build there.
:func:`infer_input_shapes` builds the net (shapes only) at candidate sizes and keeps the first
with which every shape check passes.

The rule:

* Only undeclared sizes are searched: a top whose shape changes with ``replace_data_layers``'
  ``default_shape`` (with ``guess=False``). Declared sizes (crop_size, new_height / new_width,
  resize_param, memory_data_param, Input layers, the forks' reader fields) are used as given, and a
  blob named in ``inputs`` (``--input``) is taken as given and not searched.
* Candidates, in order: the size ``replace_data_layers`` guesses for the reader (SegNet's
  360 x 480, MNIST / CIFAR sources), when it guesses one; the H x W of a searched blob that
  ``inputs`` gives; sizes from the net itself (crop and resize fields of other layers, e.g. the
  other phase's data layer, then height / width pairs of any layer: Interp, Upsample, Resize
  targets, then the H x W of Input / DummyData / net-level input shapes and 4-d Reshape dims);
  the input sizes the net files in the same directory declare (its deploy file's; a text scan,
  :func:`caffepy.zoo.candidates.family_sizes`); the default (224); the usual sizes of the field
  (:data:`caffepy.zoo.candidates.USUAL`);
  the H x W a candidate's failed check asks for (:func:`asked_sizes`: a loss comparing the
  input with what the net makes of it), tried next;
  stride-friendly squares (multiples of 32, then 16, then 8, from 16 to 1024); when the product
  of the strides along the net's most strided path is over 32 (a YOLO passthrough's Reorg after
  five stride-2 stages, a deep PVANet), the usual sizes and squares divisible by it come first,
  with its multiples; all listed by :mod:`caffepy.zoo.candidates`. One size is given to every
  searched data layer. At most ``max_candidates`` builds (:data:`MAX_CANDIDATES`); the time
  limit ``max_seconds`` (:data:`MAX_SECONDS`) is only a guard for a slow or busy machine, set
  above what the count takes here, so the result does not depend on the machine's load.
* Channels: the reader's own (``is_color``, else 3). When the file declares neither them nor
  the size, 1 and 3, the count of ``transform_param.mean_value`` and the input channels of the first convolution
  of ``weights`` are tried too (at the first candidate size, and after the sizes at the first
  twenty).
* A file that declares every size but not the channels (an LMDB with a crop_size) is built
  with the reader's channels, then, when that fails a shape check, with the other counts above
  (:func:`channel_tops`).
* With ``weights`` (a .caffemodel) the shapes of its blobs are checks as well: a layer whose
  parameter shapes differ from the weights' (an InnerProduct whose flattened input is another
  size) fails the candidate.
* Open tops (:mod:`caffepy.zoo.label_shapes`): a replaced reader's tops whose shapes the file
  does not state take the shapes their readers need, in each candidate: a Slice's (before the
  build), and the one a layer that rejects such a top names (after a failed build, then the
  candidate is built again, at most 8 times): a super-resolution net's bicubic input takes the
  shape of its upsampled output, a density map the shape of the prediction, a label sliced on
  axis 1 (N, K), a SoftmaxWithLoss label one value per position, an LSTM's ``cont`` (T, N).
  This holds whether or not a size is searched. Label maps instead of label vectors are tried
  at the first sizes, and the second candidate gives a searched HDF5Data top rows (N, C) of
  values instead of images.
* Every layer's shape checks are the candidate's: Concat (bottoms equal off the concat axis),
  Eltwise (equal shapes), Crop (the reference fits), Reorg (its stride divides H and W), and the
  sizes Caffe's rounding gives (pooling rounds up, convolution down) are what they compare.
* A candidate fails on any exception; when the first candidate fails on something other than a
  shape (:class:`caffepy.errors.ShapeError`), nothing is searched and that error is raised.
  When no candidate builds, a one-line :class:`caffepy.errors.CaffeError` gives the count tried
  and the first candidate's error.
"""
import time

from ..errors import CaffeError, ShapeError
from ..proto import caffe_pb2
from .candidates import (candidates as _candidates, channel_options as _channel_options,
                         check_weights, shapes_by_top as _shapes_by_top,
                         weight_shapes as _weight_shapes)
from .label_shapes import (LABEL_LAYOUTS, LABEL_MAP_SIZES, as_rows, hdf5_rows, image_shapes,
                           label_tops, lay_out_labels, open_tops, slice_shapes)
from .learn_shapes import MAX_LEARN, learn

MAX_CANDIDATES = 200
MAX_SECONDS = 40.0
ROWS = "rows"                                     # the layout of an HDF5 file's rows (N, C)
_SENTINELS = ((3, 517, 733), (5, 1031, 1237))    # two defaults no file declares


def _size_failure(error):
    """Whether ``error`` says a candidate size is wrong: a shape check, or a Python layer's own
    ``reshape`` failing on the shapes it was given (indexing an axis the guessed blob lacks, or a
    shape check of caffepy's that its code met)."""
    if isinstance(error, ShapeError):
        return True
    from ..layers.python_layer import PythonLayerError
    return isinstance(error, PythonLayerError) and error.phase == "reshape" and \
        isinstance(error.original, (IndexError, ValueError, AssertionError, ShapeError))


class Inference(object):
    """What :func:`infer_input_shapes` found: ``param`` (the NetParameter with Input layers),
    ``net`` (what ``build`` returned for it), ``shapes`` ({searched blob: shape}), ``source``
    (where the chosen size came from), ``tried`` (candidates built) and ``line`` (the one-line
    report, None when nothing was searched)."""

    def __init__(self, param, net, shapes, source, tried):
        self.param, self.net, self.shapes, self.source, self.tried = param, net, shapes, source, tried
        self.line = report_line(shapes, source, tried) if shapes else None


def report_line(shapes, source, tried):
    blobs = ", ".join("%s = %s" % (b, " x ".join(str(d) for d in s)) for b, s in shapes.items())
    return ("Input size inferred: %s (the size that makes every shape check pass; %s, candidate "
            "%d); override with %s" % (blobs, source, tried, " ".join(
                "--input %s=%s" % (b, "N,C,H,W" if len(s) == 4 else ",".join(
                    "d%d" % i for i in range(len(s)))) for b, s in shapes.items())))


def searched_tops(net_param, batch_size=None, fixed=()):
    """{blob: channels undeclared too} for the data-layer tops whose size the file leaves open,
    the first such top of each data layer (the image; its label maps follow it), less ``fixed``.
    A top whose size is declared is not searched, whether or not its channels are."""
    from . import is_data_layer, replace_data_layers
    a, b = (replace_data_layers(net_param, s, batch_size, guess=False) for s in _SENTINELS)
    out = {}
    for la, lb, lo in zip(a.layer, b.layer, net_param.layer):
        if not is_data_layer(lo) or la.type != "Input":
            continue
        for top, sa, sb in zip(la.top, la.input_param.shape, lb.input_param.shape):
            a_dims, b_dims = list(sa.dim), list(sb.dim)
            if a_dims[:1] + a_dims[2:] != b_dims[:1] + b_dims[2:]:    # its size, not channels
                if top not in fixed and not any(t in fixed for t in la.top):
                    out[top] = len(sa.dim) > 1 and sa.dim[1] != sb.dim[1]
                break
    return out


def channel_tops(net_param, batch_size=None, fixed=()):
    """{blob: True} for the data-layer tops whose channels the file leaves open (an LMDB read
    with a crop_size and no channel count), less ``fixed``."""
    from . import is_data_layer, replace_data_layers
    a, b = (replace_data_layers(net_param, (c, 64, 64), batch_size, guess=False) for c in (3, 5))
    out = {}
    for la, lb, lo in zip(a.layer, b.layer, net_param.layer):
        if not is_data_layer(lo) or la.type != "Input" or any(t in fixed for t in la.top):
            continue
        for top, sa, sb in zip(la.top, la.input_param.shape, lb.input_param.shape):
            if len(sa.dim) > 1 and sa.dim[1] != sb.dim[1]:
                out[top] = True
    return out


def infer_input_shapes(net_param, phase=caffe_pb2.TEST, inputs=None, weights=None,
                       default_shape=(3, 224, 224), batch_size=None, build=None, prepare=None,
                       fixed=(), max_candidates=MAX_CANDIDATES, max_seconds=MAX_SECONDS,
                       path=None):
    """Replace the data layers of ``net_param`` and search the sizes the file leaves open (module
    doc); return an :class:`Inference`.

    ``inputs``: {blob: shape} taken as given (applied to the Input layers unless ``prepare`` is
    given); ``weights``: a .caffemodel path whose blob shapes are checked; ``build(param)``: builds
    a candidate and returns the net (default: ``Net(param, phase)`` under shapes_only);
    ``prepare(param)``: edits each candidate's NetParameter in place before it is built;
    ``fixed``: more blobs not to search; ``path``: the net file's (the sizes of the net files
    beside it are candidates)."""
    from . import replace_data_layers
    inputs = dict(inputs or {})
    shapes = _weight_shapes(weights) if weights else None
    if build is None:
        def build(param):
            from ..layers.base import shapes_only
            from ..net import Net
            with shapes_only():
                return Net(param, phase)
    if prepare is None:
        def prepare(param):
            set_input_shapes(param, inputs)

    def attempt(c, h, w, guess, layout=None):
        param = replace_data_layers(net_param, (c, h, w), batch_size, guess=guess)
        if layout == ROWS:
            as_rows(param, rows)
        elif layout is not None:
            lay_out_labels(param, labels, layout)
        prepare(param)
        learned = image_shapes(param, opened) + slice_shapes(param, opened)
        for _ in range(MAX_LEARN + 1):
            try:
                net = build(param)
                break
            except ShapeError as e:
                step = learn(param, e, opened)
                if step is None or len(learned) >= MAX_LEARN:
                    raise
                learned.append(step)
                # a sequence reader's first top may have changed: the tops beside it follow
                learned += image_shapes(param, opened, permuted_only=True)
        if shapes:
            check_weights(net, shapes)
        attempt.learned = learned
        return param, net

    searched = searched_tops(net_param, batch_size, set(inputs) | set(fixed))
    opened = open_tops(net_param) - set(inputs) - set(fixed)
    if not searched:
        tried, channels = 1, default_shape[0]
        loose = channel_tops(net_param, batch_size, set(inputs) | set(fixed))
        alts = [c for c in _channel_options(net_param, loose, shapes) if c != channels] \
            if loose else []
        try:
            param, net = attempt(channels, default_shape[1], default_shape[2], True)
        except ShapeError:
            for c in dict.fromkeys(alts):     # the size is declared, the channels are not
                tried += 1
                try:
                    param, net = attempt(c, default_shape[1], default_shape[2], True)
                except ShapeError:
                    continue
                channels = c
                break
            else:
                raise
        found = _shapes_by_top(param)
        what = [what for _, what in attempt.learned]
        kept = {top: found[top] for top, _ in attempt.learned}
        if channels != default_shape[0]:
            kept.update((top, found[top]) for top in loose if top in found)
            what.insert(0, "%d channel%s (the file declares the size, not the channels)"
                        % (channels, "" if channels == 1 else "s"))
        return Inference(param, net, kept, "; ".join(what), tried)
    start, first_error = time.time(), None
    cands = _candidates(net_param, searched, default_shape, batch_size, inputs, shapes, path)
    labels = label_tops(net_param, searched, set(inputs) | set(fixed))
    cands = [cand + (None,) for cand in cands]
    if labels:              # label maps instead of label vectors, after the first sizes
        plain = [k for k, cand in enumerate(cands) if not cand[3]][:LABEL_MAP_SIZES]
        maps = [(c, h, w, False, where + ", " + what, layout) for layout, what in LABEL_LAYOUTS
                for c, h, w, _, where, _ in (cands[k] for k in plain)]
        at = plain[-1] + 1 if plain else len(cands)
        cands[at:at] = maps
    rows = hdf5_rows(net_param, searched)
    if rows:                # an HDF5 file's rows of values instead of images, second
        c, h, w, guess, where, _ = cands[0]
        cands[1:1] = [(c, h, w, guess, where + ", rows of values (N x C)", ROWS)]
    tried, fallback, k = 0, None, 0
    cands = cands[:max_candidates]
    while k < len(cands):
        c, h, w, guess, where, layout = cands[k]
        k += 1
        if tried and time.time() - start > max_seconds:
            break
        tried += 1
        try:
            param, net = attempt(c or default_shape[0], h, w, guess, layout)
        except Exception as e:
            if first_error is None:
                if not _size_failure(e):
                    raise
                first_error = e
            if fallback is None and isinstance(e, CaffeError) and not _size_failure(e):
                name = terminal_layer(net_param, getattr(e, "layer_name", None))
                fallback = (name, "at %d x %d: %s" % (h, w, e)) if name else None
            cands[k:k] = asked_sizes(e, (c, h, w, layout), cands)
            continue
        found = _shapes_by_top(param)
        source = where if guess else "%d x %d: %s" % (h, w, where)
        kept = {b: found[b] for b in searched if b in found}
        for top, what in attempt.learned:
            kept[top] = found[top]
            source += "; " + what
        return Inference(param, net, kept, source, tried)
    first = " ".join(str(first_error).split())
    error = CaffeError("no input size makes every shape check pass (%d candidates tried in %.1f "
                       "s: sizes from the net, the usual sizes, squares from 16 to 1024); at the "
                       "first, %d x %d: %s; give the size with %s"
                       % (tried, time.time() - start, cands[0][1], cands[0][2], first,
                          " ".join("--input %s=N,C,H,W" % b for b in searched)))
    error.terminal_fallback = fallback
    raise error


def asked_sizes(error, like, cands):
    """Candidates for the sizes a failed check asks for, that no candidate in ``cands`` has yet:
    when one of the two bottoms the check compares (``fits`` of the ShapeError, 4 or more axes)
    has the failed candidate's H x W, the other's H x W (an autoencoder's EuclideanLoss wants
    its input the size its deconvolutions make, 82 x 82). ``like``: (channels, h, w, layout) of
    the failed candidate."""
    c, h, w, layout = like
    fits = [f for f in getattr(error, "fits", None) or () if len(f[1]) >= 4]
    if not any(tuple(shape[-2:]) == (h, w) for _, shape, _ in fits):
        return []
    have = {(cand[1], cand[2]) for cand in cands}
    out = []
    for _, shape, _ in fits:
        if min(shape[-2:]) >= 8 and tuple(shape[-2:]) not in have:
            have.add(tuple(shape[-2:]))
            out.append((c, int(shape[-2]), int(shape[-1]), False,
                        "the size layer '%s' asks for" % getattr(error, "layer_name", "?"),
                        layout))
    return out


def terminal_layer(net_param, name):
    """``name`` when it names one layer of ``net_param`` whose tops no later layer reads (a loss,
    an evaluation or output layer at the end of the net) and that is not a data layer, else
    None. A candidate size at which only such a layer fails, on something other than a shape
    check (a fork's form of the layer: its bottoms, its label layout), builds everything the rest
    of the net needs: :func:`caffepy.zoo.summary.summarize` may show the net at that size
    without it. (A terminal Concat or Crop failing its shape check is what the search is for.)"""
    from . import is_data_layer
    layers = list(net_param.layer)
    at = [i for i, lp in enumerate(layers) if lp.name == name]
    if name is None or len(at) != 1 or is_data_layer(layers[at[0]]):
        return None
    lp = layers[at[0]]
    if any(t in lp.bottom for t in lp.top):          # in place: it rewrites a blob others read
        return None
    if any(t in x.bottom for x in layers[at[0] + 1:] for t in lp.top):
        return None
    return name


def set_input_shapes(param, inputs):
    """Give the Input tops named in ``inputs`` those shapes (every Input with that top: a train /
    val file's TRAIN and TEST readers alike); return the names no Input top has."""
    found = set()
    for lp in param.layer:
        if lp.type != "Input":
            continue
        for i, top in enumerate(lp.top):
            if top in inputs:
                while len(lp.input_param.shape) <= i:
                    lp.input_param.shape.add()
                del lp.input_param.shape[i].dim[:]
                lp.input_param.shape[i].dim.extend(int(d) for d in inputs[top])
                found.add(top)
    return sorted(set(inputs) - found)
