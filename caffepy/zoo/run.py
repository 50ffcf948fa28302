"""Running a model-zoo net on made-up data (the other half of :mod:`caffepy.zoo`).

``input_values(name, shape, rng)`` gives sensible values for such an input (ids within an
Embed's ``input_dim`` where one reads it, image-sized
``im_info``, valid ``rois`` and ``gt_boxes``, zero labels (for a blob named ``label`` and for any
blob that only classification losses and accuracies read as their labels), one ground-truth box
of class 1 in SSD label rows ``(..., 8)`` and of class 0 in MobileNet-YOLO's ``(N, 1, 300, 5)``,
one box of class 1 in DetectNet's ``(N, 1, R, 16)``, gaussian images). Only a NetParameter is
produced: building and running it is the Net's business.

``fill_unset_num_output(net_param, 10)`` gives every InnerProduct layer without ``num_output``
that many outputs, whatever the file (DIGITS' rule, applied only to files recognisably DIGITS',
is :mod:`caffepy.proto.digits`).

``read_for_run(path)`` reads a net file's text as ``caffepy summary`` reads it (a singular field
given twice takes its last value, a V1 ``type: "Input"`` in quotes, ``//`` comments, template
placeholders: :mod:`caffepy.proto.lenient_text`, each named in a WARNING) and gives a DIGITS
classification network's open classifiers ``num_classes`` or summary's stand-in
(:func:`caffepy.proto.digits.complete`), so that what summary builds is what a random-weight run
builds; fields caffepy does not know stay errors, and ``Net`` / ``caffe.Net`` themselves keep
Caffe's strict parser.

Cheap random weights (for sweeps that only need *some* weights): ``constant_fillers(net_param)``
returns a copy in which every weight/bias filler is ``constant`` (a constant filler keeps its value,
any other becomes 0; DummyData's fillers are left alone), so building the Net draws no random
numbers; ``randomize_params(net, seed)`` then fills every parameter blob of 2 or more axes with
``N(0, 2 / fan_in)`` values cut from one pool of 2^20 normals (a memory copy, not a draw per
weight), and gives BatchNorm layers mean 0, variance 1 (scale factor 1). 1-axis blobs (biases,
Scale/PReLU factors) keep their constant fillers. ``forward_releasing(net)`` runs a forward pass
that frees each intermediate blob once its last reader has run (outputs are kept) and each
convolution's im2col buffers after its forward, so its memory peak is what is alive at once
rather than everything (a 513 x 513 PSPNet: ~8 GB otherwise). Random weights make deep nets'
activations grow layer after layer (a residual net without working normalisation overflows to
inf); ``forward_releasing(net, calibrate=True)`` therefore gives every batch-normalisation layer
(those with ``set_statistics``: BatchNorm and its NVCaffe variant, PSPNet's BN) the per-channel
mean and variance of the input it actually gets, as a trained net's statistics would be, before
it runs (a data-dependent initialisation in one pass). A channel that gives one value (a batch of
1 through an InnerProduct) or values without spread has no variance to measure: such channels take
the mean and variance of the whole input instead (1 if that has none either), since its own would
be 0 and a layer with ``eps: 0`` (zhujianwei31415/DeepFR's) would then divide 0 by 0, which a
trained net's statistics, gathered over many images, never make it do.
"""
import numpy as np

from ..proto import caffe_pb2, digits, io as proto_io, is_repeated
from ..proto.lenient_text import text_repairs


def _roi_rows(shape):
    """Whether ``shape`` holds one 5-value row per ROI: (R, 5) or (R, 5, 1, 1)."""
    return bool(shape) and (shape[-1] == 5 or (len(shape) >= 2 and shape[1] == 5
                                               and all(d == 1 for d in shape[2:])))


#: Layer types whose bottom at the index given reads class labels (integers in [0, classes)):
#: an input blob read there takes label values whatever its name (pagenet's "gt").
LABEL_READERS = {"SoftmaxWithLoss": 1, "Accuracy": 1, "MultinomialLogisticLoss": 1,
                 "InfogainLoss": 1, "HingeLoss": 1, "SoftmaxWithLossOHEM": 1, "FocalLoss": 1,
                 "SoftmaxFocalLoss": 1, "ContrastiveLoss": 2}


def _reads_labels(kind, index):
    """Whether bottom ``index`` of a layer of type ``kind`` reads class labels: the types of
    :data:`LABEL_READERS`, and any fork's ``...Softmax...Loss`` or ``...Accuracy`` type at
    bottom 1 (a fork's variant of a classification loss takes its labels where BVLC's does)."""
    if LABEL_READERS.get(kind) == index:
        return True
    lower = kind.lower()
    return index == 1 and (("softmax" in lower and "loss" in lower) or lower.endswith("accuracy"))


def input_values(name, shape, rng=None, image_hw=None, consumers=()):
    """Sensible values for an input blob named ``name`` of ``shape`` (see module doc).
    ``consumers``: (layer type, bottom index, LayerParameter) of the layers that read it: ids in
    ``[0, input_dim)`` for an Embed, valid boxes of image 0 for a ROI pooling's second bottom,
    zero labels (class 0) for a classification loss's or an accuracy's label bottom."""
    rng = np.random.default_rng(0) if rng is None else rng
    name = name.lower()
    shape = tuple(shape)
    for kind, index, lp in consumers:
        if kind == "Embed" and index == 0 and lp.embed_param.input_dim > 0:
            return rng.integers(0, lp.embed_param.input_dim, size=shape).astype(np.float64)
        if "ROI" in kind.upper() and index == 1 and _roi_rows(shape):
            name = "rois"
    if consumers and all(_reads_labels(kind, index) for kind, index, _ in consumers):
        return np.zeros(shape)
    if name == "im_info" and shape and shape[-1] == 3:
        H, W = image_hw or (224, 224)
        return np.tile(np.array([H, W, 1.0]), shape[:-1] + (1,))
    if name in ("rois", "gt_boxes") and _roi_rows(shape):
        H, W = image_hw or (224, 224)
        v = np.zeros((shape[0], 5) if shape[-1] != 5 else shape)
        v[..., 1:5] = [W * 0.1, H * 0.1, W * 0.6, H * 0.7]
        if name == "gt_boxes":
            v[..., :4], v[..., 4] = v[..., 1:5].copy(), 1
        return v.reshape(shape)
    if "label" in name and len(shape) == 4 and shape[-1] == 8:    # SSD ground truth rows
        v = np.full(shape, -1.0)
        v[..., 0, :] = [0, 1, 0, 0.1, 0.1, 0.6, 0.7, 0]            # one box of class 1, image 0
        return v
    if "label" in name and len(shape) == 4 and shape[-2:] == (300, 5):   # MobileNet-YOLO truths
        v = np.zeros(shape)
        v[..., 0, :] = [0, 0.5, 0.5, 0.3, 0.4]                    # one box of class 0
        return v
    if "label" in name and len(shape) == 4 and shape[-1] == 16 and shape[-2] >= 2:  # DetectNet
        H, W = image_hw or (224, 224)
        v = np.zeros(shape)
        v[..., 0, :2] = [1, 16]                                  # header: one box of 16 values
        v[..., 1, :6] = [W * 0.1, H * 0.1, W * 0.5, H * 0.6, 0, 1]   # x, y, w, h, alpha, class 1
        return v
    if "label" in name or "marker" in name or name.startswith("bbox_"):
        return np.zeros(shape) if "marker" not in name else np.ones(shape)
    return rng.standard_normal(shape)


def net_input_values(net, rng=None, image_hw=None):
    """{input name: values} for every input of a built Net, each from :func:`input_values` told
    which layers read it."""
    readers = {name: [] for name in net.inputs}
    alias = {name: name for name in net.inputs}       # a Split's tops stand for its bottom
    for layer in net.layers:
        lp = layer.layer_param
        for j, name in enumerate(net.bottom_names.get(lp.name, ())):
            if name not in alias:
                continue
            if lp.type == "Split":
                alias.update((top, alias[name]) for top in net.top_names.get(lp.name, ()))
            else:
                readers[alias[name]].append((lp.type, j, lp))
    return {name: input_values(name, net.blobs[name].shape, rng, image_hw, readers[name])
            for name in net.inputs}


def read_for_run(source, num_classes=None):
    """The NetParameter of ``source`` read as summary reads it (module doc)."""
    with text_repairs():
        param = proto_io.read_net(source)
    digits.complete(param, num_classes, source if isinstance(source, str) else "<NetParameter>",
                    stand_in=True)
    return param


_FILLER = "caffe.FillerParameter"
_POOL_SIZE = 1 << 20
_pools = {}


def constant_fillers(net_param):
    """A copy of ``net_param`` whose weight and bias fillers are all constant (see module doc)."""
    out = caffe_pb2.NetParameter()
    out.CopyFrom(net_param)
    for lp in out.layer:
        for field, sub in lp.ListFields():
            if field.message_type is None or field.name == "dummy_data_param" or \
                    is_repeated(field):
                continue
            for f, filler in sub.ListFields():
                if f.message_type is not None and f.message_type.full_name == _FILLER:
                    fillers = filler if is_repeated(f) else [filler]
                    for fp in fillers:
                        value = fp.value if fp.type == "constant" else 0.0
                        fp.Clear()
                        fp.type, fp.value = "constant", value
    return out


def _pool(seed):
    if seed not in _pools:
        normals = np.random.default_rng(seed).standard_normal(_POOL_SIZE).astype(np.float32)
        _pools[seed] = np.concatenate([normals, normals])
    return _pools[seed]


def randomize_params(net, seed=0):
    """Fill ``net``'s parameter blobs with cheap random values (see module doc)."""
    pool = _pool(seed)
    offsets = np.random.default_rng(seed + 1)
    for layer in net.layers:
        blobs = layer.blobs
        if layer.layer_param.type == "BatchNorm" and len(blobs) == 3:
            blobs[0].data[...], blobs[1].data[...], blobs[2].data[...] = 0, 1, 1
            continue
        for blob in blobs:
            shape = blob.data.shape
            if len(shape) < 2 or blob.count == 0:
                continue
            std = np.sqrt(2.0 / max(blob.count // shape[0], 1))
            start = int(offsets.integers(_POOL_SIZE))
            window = pool[start:start + _POOL_SIZE]
            values = window[:blob.count] if blob.count <= _POOL_SIZE else \
                np.resize(window, blob.count)
            np.multiply(values.reshape(shape), std, out=blob.data, casting="unsafe")


def forward_releasing(net, calibrate=False):
    """Forward pass freeing intermediate blobs after their last use (see module doc); returns
    the loss. The freed blobs are left with shape (0,). ``calibrate``: each batch-normalisation
    layer first takes the per-channel mean and variance of the input it gets as its stored
    statistics (see module doc)."""
    keep = {id(net.blobs[name]) for name in net.outputs}
    last = {}
    for i in range(len(net.layers)):
        for blob in list(net.bottom_vecs[i]) + list(net.top_vecs[i]):
            last[id(blob)] = (i, blob)
    release = [[] for _ in net.layers]
    for i, blob in last.values():
        if id(blob) not in keep:
            release[i].append(blob)
    loss = 0.0
    for i, layer in enumerate(net.layers):
        if calibrate and hasattr(layer, "set_statistics"):
            _calibrate(layer, net.bottom_vecs[i][0].data)
        loss += layer.forward(net.bottom_vecs[i], net.top_vecs[i])
        for blob in release[i]:
            blob.reshape((0,))
        scratch = getattr(layer, "_cols", None)      # convolution's im2col buffers
        if isinstance(scratch, dict):
            scratch.clear()
    return loss


def _calibrate(layer, x):
    x = np.asarray(x, dtype=np.float64)
    x = x.reshape(x.shape[0] if x.ndim else 1, layer.channels, -1)
    overall = x.var() or 1.0
    if x.shape[0] * x.shape[2] < 2:         # one value per channel: the whole input's statistics
        mean, var = np.full(layer.channels, x.mean()), np.full(layer.channels, overall)
    else:
        mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    layer.set_statistics(mean, np.where(var > 0, var, overall))


def fill_unset_num_output(net_param, value=10):
    """A copy of ``net_param`` whose InnerProduct layers without num_output get ``value``."""
    out = caffe_pb2.NetParameter()
    out.CopyFrom(net_param)
    for lp in out.layer:
        if lp.type == "InnerProduct" and not lp.inner_product_param.num_output:
            lp.inner_product_param.num_output = value
    return out
