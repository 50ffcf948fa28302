"""V0 nets (``layers { layer { type: "conv" ... } bottom: ... }``) → V1 nets (``layers { type: CONVOLUTION }``).

Caffe's first format (before 2014) kept every setting of every layer type flat in one
``V0LayerParameter`` inside each ``layers`` connection. The upgrade, as BVLC Caffe does it
(``UpgradeV0Net`` in ``upgrade_proto.cpp``):

1. *padding layers fold into their consumer*: a ``type: "padding"`` layer feeding a ``conv`` or
   ``pool`` layer is dropped; its ``pad`` moves to the consumer, whose bottom becomes the padding
   layer's bottom. Both layers must have exactly one bottom (and the padding layer one top).
2. *each layer's flat fields move into typed messages*, keyed by the V0 type string (table
   :data:`_FIELD_RULES`): ``num_output`` → ``convolution_param`` or ``inner_product_param``,
   ``kernelsize``/``stride``/``pad`` → ``convolution_param`` (repeated) or ``pooling_param``,
   ``source``/``batchsize`` → the data layer's param, ``scale``/``meanfile``/``cropsize``/``mirror``
   → ``transform_param`` for every type, ``blobs``/``blobs_lr``/``weight_decay`` stay per layer.
   A field that does not apply to the layer's type is reported, not fatal (Caffe continues too).
3. the net keeps only ``name``, ``input``, ``input_dim`` and ``force_backward``.

The result is a V1 net that :mod:`caffepy.proto.upgrade` then takes to the current format.
"""
from ..errors import ProtoError
from . import caffe_pb2
from . import is_repeated

V1 = caffe_pb2.V1LayerParameter

#: V0 type string → V1 LayerType enum value.
V0_TYPES = {
    "accuracy": V1.ACCURACY, "bnll": V1.BNLL, "concat": V1.CONCAT, "conv": V1.CONVOLUTION,
    "data": V1.DATA, "dropout": V1.DROPOUT, "euclidean_loss": V1.EUCLIDEAN_LOSS,
    "flatten": V1.FLATTEN, "hdf5_data": V1.HDF5_DATA, "hdf5_output": V1.HDF5_OUTPUT,
    "im2col": V1.IM2COL, "images": V1.IMAGE_DATA, "infogain_loss": V1.INFOGAIN_LOSS,
    "innerproduct": V1.INNER_PRODUCT, "lrn": V1.LRN,
    "multinomial_logistic_loss": V1.MULTINOMIAL_LOGISTIC_LOSS, "pool": V1.POOLING,
    "relu": V1.RELU, "sigmoid": V1.SIGMOID, "softmax": V1.SOFTMAX,
    "softmax_loss": V1.SOFTMAX_LOSS, "split": V1.SPLIT, "tanh": V1.TANH,
    "window_data": V1.WINDOW_DATA,
}

_DATA = {"data": "data_param", "hdf5_data": "hdf5_data_param", "images": "image_data_param",
         "window_data": "window_data_param"}
_CONV_IP = {"conv": "convolution_param", "innerproduct": "inner_product_param"}
_CONV_POOL = {"conv": "convolution_param", "pool": "pooling_param"}

#: V0 field → (target field name, {V0 type: V1 param message}); ``None`` as the mapping means the
#: field applies to every type and lands in ``transform_param``.
_FIELD_RULES = {
    "num_output": ("num_output", _CONV_IP),
    "biasterm": ("bias_term", _CONV_IP),
    "weight_filler": ("weight_filler", _CONV_IP),
    "bias_filler": ("bias_filler", _CONV_IP),
    "pad": ("pad", _CONV_POOL),
    "kernelsize": ("kernel_size", _CONV_POOL),
    "stride": ("stride", _CONV_POOL),
    "group": ("group", {"conv": "convolution_param"}),
    "pool": ("pool", {"pool": "pooling_param"}),
    "dropout_ratio": ("dropout_ratio", {"dropout": "dropout_param"}),
    "local_size": ("local_size", {"lrn": "lrn_param"}),
    "alpha": ("alpha", {"lrn": "lrn_param"}),
    "beta": ("beta", {"lrn": "lrn_param"}),
    "k": ("k", {"lrn": "lrn_param"}),
    "source": ("source", dict(_DATA, infogain_loss="infogain_loss_param")),
    "batchsize": ("batch_size", _DATA),
    "rand_skip": ("rand_skip", {"data": "data_param", "images": "image_data_param"}),
    "shuffle_images": ("shuffle", {"images": "image_data_param"}),
    "new_height": ("new_height", {"images": "image_data_param"}),
    "new_width": ("new_width", {"images": "image_data_param"}),
    "concat_dim": ("concat_dim", {"concat": "concat_param"}),
    "det_fg_threshold": ("fg_threshold", {"window_data": "window_data_param"}),
    "det_bg_threshold": ("bg_threshold", {"window_data": "window_data_param"}),
    "det_fg_fraction": ("fg_fraction", {"window_data": "window_data_param"}),
    "det_context_pad": ("context_pad", {"window_data": "window_data_param"}),
    "det_crop_mode": ("crop_mode", {"window_data": "window_data_param"}),
    "hdf5_output_param": ("hdf5_output_param", {"hdf5_output": None}),
    "scale": ("scale", None),
    "meanfile": ("mean_file", None),
    "cropsize": ("crop_size", None),
    "mirror": ("mirror", None),
}
#: V0 fields copied as they are, or (as Caffe does) ignored.
_HANDLED = {"name", "type", "blobs", "blobs_lr", "weight_decay"}
_IGNORED = {"new_num", "new_channels"}


def net_needs_v0_upgrade(net):
    """True when any ``layers`` entry carries a V0 ``layer`` message."""
    return any(conn.HasField("layer") for conn in net.layers)


def _fold_padding(net, filename):
    """The V0 connections with padding layers folded into the conv/pool layer they feed."""
    out = []
    producer = {name: None for name in net.input}
    for conn in net.layers:
        layer = conn.layer
        if layer.type != "padding":
            kept = V1()
            kept.CopyFrom(conn)
            out.append(kept)
        for j, blob in enumerate(conn.bottom):
            if blob not in producer:
                raise ProtoError("%s: layer '%s': unknown bottom blob '%s' (no earlier layer or "
                                 "input produces it)" % (filename, layer.name, blob))
            src = producer[blob]
            if src is None or src.layer.type != "padding":
                continue
            if layer.type not in ("conv", "pool"):
                raise ProtoError("%s: layer '%s': padding layer '%s' feeds a '%s' layer; only conv "
                                 "and pool layers can take padding" % (filename, layer.name,
                                                                       src.layer.name, layer.type))
            if len(conn.bottom) != 1 or len(src.bottom) != 1 or len(src.top) != 1:
                raise ProtoError("%s: layer '%s': padding layer '%s' and its consumer must each "
                                 "have exactly one bottom (and the padding layer one top)"
                                 % (filename, layer.name, src.layer.name))
            out[-1].layer.pad = src.layer.pad
            out[-1].bottom[j] = src.bottom[0]
        for blob in conn.top:
            producer[blob] = conn
    return out


def _set(msg, name, value):
    field = msg.DESCRIPTOR.fields_by_name[name]
    if is_repeated(field):
        getattr(msg, name).append(value)
    elif field.message_type is not None:
        getattr(msg, name).CopyFrom(value)
    else:
        setattr(msg, name, value)


def upgrade_v0_layer(conn, problems, raw=None):
    """One V0 connection (``layers { layer {...} bottom top }``) as a V1 layer. ``raw``: a
    one-item list that receives a type Caffe does not know (the V1 layer then has no type),
    instead of the error."""
    v1 = V1()
    v1.bottom.extend(conn.bottom)
    v1.top.extend(conn.top)
    if not conn.HasField("layer"):
        return v1
    v0 = conn.layer
    vtype = v0.type
    if v0.HasField("name"):
        v1.name = v0.name
    if v0.HasField("type"):
        if vtype not in V0_TYPES and raw is not None:
            raw.append(vtype)
            problems.append("layer '%s': V0 type \"%s\" is not one Caffe knows (kept as its name: "
                            "the structure only)" % (v0.name, vtype))
        elif vtype not in V0_TYPES:
            raise ProtoError("layer '%s': unknown V0 layer type \"%s\" (known: %s)"
                             % (v0.name, vtype, ", ".join(sorted(V0_TYPES))))
        else:
            v1.type = V0_TYPES[vtype]
    v1.blobs.extend(v0.blobs)
    v1.blobs_lr.extend(v0.blobs_lr)
    v1.weight_decay.extend(v0.weight_decay)
    for field, value in v0.ListFields():
        name = field.name
        if name in _HANDLED or name in _IGNORED:
            continue
        target, by_type = _FIELD_RULES[name]
        if by_type is None:
            _set(v1.transform_param, target, value)
        elif vtype in by_type:
            param = by_type[vtype] or target
            if param == target:
                _set(v1, target, value)
            else:
                _set(getattr(v1, param), target, value)
        else:
            problems.append("layer '%s': V0 field %s does not apply to type \"%s\" (dropped)"
                            % (v0.name, name, vtype))
    return v1


def upgrade_v0_net(net, filename, problems, raw_types=None):
    """Rewrite ``net`` (a V0 NetParameter) in place as a V1 net. ``raw_types``: None, or a dict
    that receives {index in the V1 ``layers``: V0 type} for the types Caffe does not know
    (instead of the error; for reading the structure only)."""
    try:
        connections = _fold_padding(net, filename)
        layers = []
        for conn in connections:
            raw = [] if raw_types is not None else None
            layers.append(upgrade_v0_layer(conn, problems, raw))
            if raw:
                raw_types[len(layers) - 1] = raw[0]
    except ProtoError as e:
        msg = str(e)
        raise ProtoError(msg if msg.startswith(filename) else "%s: %s" % (filename, msg))
    keep = caffe_pb2.NetParameter()
    if net.HasField("name"):
        keep.name = net.name
    keep.input.extend(net.input)
    keep.input_dim.extend(net.input_dim)
    if net.HasField("force_backward"):
        keep.force_backward = net.force_backward
    keep.layers.extend(layers)
    net.CopyFrom(keep)
    return net
