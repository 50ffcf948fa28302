"""Every legacy Caffe format, upgraded on load so the rest of caffepy sees only the current schema.

Text and binary files go through the same steps, in BVLC Caffe's order (``UpgradeNetAsNeeded`` in
``upgrade_proto.cpp``); each step runs only when its test says the net needs it:

===========================  ==========================================  ==============================
step                         needed when                                 does
===========================  ==========================================  ==============================
V0 → V1                      a ``layers`` entry has a ``layer`` message  :mod:`.upgrade_v0`
data transformation          a V1 DATA / IMAGE_DATA / WINDOW_DATA layer  ``scale``, ``mean_file``,
                             sets scale/mean_file/crop_size/mirror in    ``crop_size``, ``mirror`` move
                             its data param                              to ``transform_param``
V1 → current                 ``layers`` is not empty                     ``layers`` → ``layer``: enum
                                                                         type → type string,
                                                                         ``param``/``blob_share_mode``/
                                                                         ``blobs_lr``/``weight_decay`` →
                                                                         ``ParamSpec`` name/share_mode/
                                                                         lr_mult/decay_mult
net input                    ``input`` is not empty                      ``input`` + ``input_shape`` or
                                                                         4 ``input_dim`` per input → an
                                                                         ``Input`` layer named "input",
                                                                         placed first
BatchNorm params             a BatchNorm layer declares 3 ``param``      their lr_mult = decay_mult = 0
===========================  ==========================================  ==============================

Solvers: the ``solver_type`` enum becomes the ``type`` string (SGD, Nesterov, AdaGrad, RMSProp,
AdaDelta, Adam); giving both is an error. Inline nets of a solver (``net_param``,
``train_net_param``, ``test_net_param``) are upgraded too.

Problems Caffe would log and step over (a V0 field that does not apply to its layer type, V1
settings with no current counterpart) are collected and reported in one warning per file through
the ``caffepy.proto.upgrade`` logger; malformed input (unknown V0 type, wrong ``input_dim`` count)
raises :class:`~caffepy.errors.ProtoError`.
"""
import logging

from ..errors import ProtoError
from . import caffe_pb2
from . import is_repeated
from .upgrade_v0 import net_needs_v0_upgrade, upgrade_v0_net
from .v1_fork_types import fork_v1_types

log = logging.getLogger(__name__)

V1 = caffe_pb2.V1LayerParameter

#: V1 LayerType enum value → current type string.
V1_TYPES = {
    V1.NONE: "", V1.ABSVAL: "AbsVal", V1.ACCURACY: "Accuracy", V1.ARGMAX: "ArgMax",
    V1.BNLL: "BNLL", V1.CONCAT: "Concat", V1.CONTRASTIVE_LOSS: "ContrastiveLoss",
    V1.CONVOLUTION: "Convolution", V1.DECONVOLUTION: "Deconvolution", V1.DATA: "Data",
    V1.DROPOUT: "Dropout", V1.DUMMY_DATA: "DummyData", V1.EUCLIDEAN_LOSS: "EuclideanLoss",
    V1.ELTWISE: "Eltwise", V1.EXP: "Exp", V1.FLATTEN: "Flatten", V1.HDF5_DATA: "HDF5Data",
    V1.HDF5_OUTPUT: "HDF5Output", V1.HINGE_LOSS: "HingeLoss", V1.IM2COL: "Im2col",
    V1.IMAGE_DATA: "ImageData", V1.INFOGAIN_LOSS: "InfogainLoss",
    V1.INNER_PRODUCT: "InnerProduct", V1.LRN: "LRN", V1.MEMORY_DATA: "MemoryData",
    V1.MULTINOMIAL_LOGISTIC_LOSS: "MultinomialLogisticLoss", V1.MVN: "MVN",
    V1.POOLING: "Pooling", V1.POWER: "Power", V1.RELU: "ReLU", V1.SIGMOID: "Sigmoid",
    V1.SIGMOID_CROSS_ENTROPY_LOSS: "SigmoidCrossEntropyLoss", V1.SILENCE: "Silence",
    V1.SOFTMAX: "Softmax", V1.SOFTMAX_LOSS: "SoftmaxWithLoss", V1.SPLIT: "Split",
    V1.SLICE: "Slice", V1.TANH: "TanH", V1.WINDOW_DATA: "WindowData",
    V1.THRESHOLD: "Threshold",
}
#: facebook/C3D v1.0's V1 types (proto/additions.d/segnet_c3d_face_flownet.json; renumbered where BVLC's values
#: collide). ELTWISE_PRODUCT is early Caffe's product layer: Eltwise with operation PROD.
V1_TYPES.update((getattr(V1, name), new) for name, new in (
    ("CONVOLUTION3D", "Convolution3D"), ("POOLING3D", "Pooling3D"), ("VIDEO_DATA", "VideoData"),
    ("VOLUME_DATA", "VolumeData"), ("DECONVOLUTION3D", "Deconvolution3D"),
    ("ELTWISE_PRODUCT", "Eltwise"),
    # C3D v1.0's video-to-video layers (its class names)
    ("VIDEO_SEGMENTATION_DATA", "VideoSegmentationData"),
    ("VIDEO_WITH_VOXEL_TRUTH_DATA", "VideoWithVoxelTruthData"),
    ("VOXEL_SOFTMAX", "VoxelWiseSoftmax"), ("VOXEL_SOFTMAX_LOSS", "VoxelWiseSoftmaxWithLoss"),
    ("VOXEL_CUSTOM_LOSS", "VoxelCustomLoss")) if hasattr(V1, name))
#: HyeonwooNoh/caffe's (DeconvNet) V1 types (proto/additions.d/surveyed_forks.json): its BN is SegNet's
#: (bn_mode, scale_filler, shift_filler), its IMAGE_SEG_DATA DeepLab's ImageSegData.
V1_TYPES.update((getattr(V1, name), new) for name, new in (
    ("BN", "BN"), ("UNPOOLING", "Unpooling"), ("ELTWISE_ACCURACY", "EltwiseAccuracy"),
    ("IMAGE_SEG_DATA", "ImageSegData"), ("WINDOW_SEG_DATA", "WindowSegData"),
    # DeepLab v1 (deeplab-public): its Interp and SegAccuracy are PSPNet's / DeepLab v2's
    ("INTERP", "Interp"), ("SEG_ACCURACY", "SegAccuracy"), ("PADDING", "Padding"))
    if hasattr(V1, name))
#: torrvision/caffe's (crfasrnn) V1 types (proto/additions.d/crfasrnn_tsn_pose.json): the FCN-era CROP becomes
#: BVLC's Crop with the offsets its coordinate maps give (caffepy.proto.v1_crop).
V1_TYPES.update((getattr(V1, name), new) for name, new in (
    ("CROP", "Crop"), ("MULTI_STAGE_MEANFIELD", "MultiStageMeanfield")) if hasattr(V1, name))
#: Other forks' V1 types (:mod:`.v1_fork_types`: the fork and where each string was read); the
#: entries above win.
for _number, _new in fork_v1_types(V1.LayerType).items():
    V1_TYPES.setdefault(_number, _new)

#: The deprecated ``solver_type`` enum → the ``type`` string.
SOLVER_TYPES = {
    caffe_pb2.SolverParameter.SGD: "SGD", caffe_pb2.SolverParameter.NESTEROV: "Nesterov",
    caffe_pb2.SolverParameter.ADAGRAD: "AdaGrad", caffe_pb2.SolverParameter.RMSPROP: "RMSProp",
    caffe_pb2.SolverParameter.ADADELTA: "AdaDelta", caffe_pb2.SolverParameter.ADAM: "Adam",
}

_DATA_LAYERS = {V1.DATA: "data_param", V1.IMAGE_DATA: "image_data_param",
                V1.WINDOW_DATA: "window_data_param"}
_TRANSFORM_FIELDS = ("scale", "mean_file", "crop_size", "mirror")
#: V1 fields the V1 → current step handles itself (everything else is copied by name).
_V1_SPECIAL = {"bottom", "top", "name", "include", "exclude", "type", "blobs", "param",
               "blob_share_mode", "blobs_lr", "weight_decay", "loss_weight", "layer"}
_LAYER_FIELDS = caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name


# -- tests: what needs upgrading ---------------------------------------------------------------

def net_needs_data_upgrade(net):
    """True when a V1 data layer keeps transformation fields in its data param."""
    for layer in net.layers:
        param = _DATA_LAYERS.get(layer.type)
        if param and any(getattr(layer, param).HasField(f) for f in _TRANSFORM_FIELDS):
            return True
    return False


def net_needs_v1_upgrade(net):
    return len(net.layers) > 0


def net_needs_input_upgrade(net):
    return len(net.input) > 0


def net_needs_batch_norm_upgrade(net):
    return any(layer.type == "BatchNorm" and len(layer.param) == 3 for layer in net.layer)


def net_needs_upgrade(net):
    """True when :func:`upgrade_net` would change ``net``."""
    frozen = all(p.lr_mult == 0 and p.decay_mult == 0 for l in net.layer
                 if l.type == "BatchNorm" and len(l.param) == 3 for p in l.param)
    return (net_needs_v0_upgrade(net) or net_needs_data_upgrade(net) or net_needs_v1_upgrade(net)
            or net_needs_input_upgrade(net) or not frozen)


def solver_needs_upgrade(solver):
    nets = list(solver.test_net_param)
    nets += [n for f, n in (("net_param", solver.net_param),
                            ("train_net_param", solver.train_net_param)) if solver.HasField(f)]
    return solver.HasField("solver_type") or any(net_needs_upgrade(n) for n in nets)


# -- steps -------------------------------------------------------------------------------------

def upgrade_data_transformation(net):
    """Move V1 data layers' scale/mean_file/crop_size/mirror into ``transform_param``."""
    for layer in net.layers:
        param = _DATA_LAYERS.get(layer.type)
        if not param:
            continue
        data = getattr(layer, param)
        for name in _TRANSFORM_FIELDS:
            if data.HasField(name):
                setattr(layer.transform_param, name, getattr(data, name))
                data.ClearField(name)
    return net


def upgrade_v1_layer(v1, problems):
    """A ``LayerParameter`` with the content of one V1 layer."""
    layer = caffe_pb2.LayerParameter()
    layer.bottom.extend(v1.bottom)
    layer.top.extend(v1.top)
    if v1.HasField("name"):
        layer.name = v1.name
    layer.include.extend(v1.include)
    layer.exclude.extend(v1.exclude)
    if v1.HasField("type"):
        layer.type = V1_TYPES.get(v1.type) or V1.LayerType.Name(v1.type)
    layer.blobs.extend(v1.blobs)
    specs = (len(v1.param), len(v1.blob_share_mode), len(v1.blobs_lr), len(v1.weight_decay))
    for _ in range(max(specs)):
        layer.param.add()
    for i, name in enumerate(v1.param):
        layer.param[i].name = name
    for i, mode in enumerate(v1.blob_share_mode):
        layer.param[i].share_mode = mode  # STRICT / PERMISSIVE keep their numbers
    for i, lr in enumerate(v1.blobs_lr):
        layer.param[i].lr_mult = lr
    for i, decay in enumerate(v1.weight_decay):
        layer.param[i].decay_mult = decay
    layer.loss_weight.extend(v1.loss_weight)
    for field, value in v1.ListFields():
        if field.name in _V1_SPECIAL:
            continue
        target = _LAYER_FIELDS.get(field.name)
        if target is not None and field.message_type is None and target.message_type is None \
                and target.type == field.type and is_repeated(target) == is_repeated(field):
            setattr(layer, field.name, value)          # a fork's scalar (DeepLab v1 strict_dim)
        elif target is not None and target.message_type is field.message_type \
                and is_repeated(target) == is_repeated(field):
            if is_repeated(field):                     # e.g. a 2014 fork's repeated regularizer
                getattr(layer, field.name).extend(value)
            else:
                getattr(layer, field.name).CopyFrom(value)
        else:
            problems.append("layer '%s': V1 field %s has no counterpart in LayerParameter "
                            "(dropped)" % (v1.name, field.name))
    if v1.type == getattr(V1, "ELTWISE_PRODUCT", None) and not v1.eltwise_param.HasField(
            "operation"):
        layer.eltwise_param.operation = caffe_pb2.EltwiseParameter.PROD
    if v1.HasField("layer"):
        problems.append("layer '%s': V1 layer also holds a V0 'layer' message (ignored)" % v1.name)
    return layer


def upgrade_v1_net(net, problems, filename="<net>", raw_types=None):
    """``layers { type: CONVOLUTION ... }`` → ``layer { type: "Convolution" ... }``, in place.
    ``raw_types``: {index in ``layers``: type name} for layers whose type the V1 enum lacks (kept
    as their names when only the structure is read)."""
    if len(net.layer):
        problems.append("net has both 'layers' (V1) and 'layer' entries; the 'layer' entries are "
                        "dropped, as Caffe does")
    layers = [upgrade_v1_layer(v1, problems) for v1 in net.layers]
    for i, name in (raw_types or {}).items():
        if i < len(layers) and not net.layers[i].HasField("type"):
            layers[i].type = name
    crops = [i for i, v1 in enumerate(net.layers) if v1.type == getattr(V1, "CROP", None)]
    if crops:
        from .v1_crop import resolve_v1_crops
        resolve_v1_crops(layers, crops, filename)
    net.ClearField("layers")
    net.ClearField("layer")
    net.layer.extend(layers)
    return net


def upgrade_net_input(net, filename="<net>"):
    """Net-level ``input`` / ``input_shape`` / ``input_dim`` → an ``Input`` layer named "input".

    With neither shapes nor dims (a legacy .caffemodel) the inputs are simply dropped.
    """
    names = list(net.input)
    bad = [n for n in names if not isinstance(n, str)]     # (a binary file's invalid UTF-8)
    if bad:
        raise ProtoError("%s: net-level input name %r is not UTF-8 text" % (filename, bad[0]))
    shapes = list(net.input_shape)
    dims = list(net.input_dim)
    if shapes or dims:
        if shapes and len(shapes) != len(names):
            raise ProtoError("%s: %d net-level inputs but %d input_shape entries (need one each)"
                             % (filename, len(names), len(shapes)))
        # 4 input_dim values an input (BVLC); 5 in the 3-D forks descended from facebook/C3D
        # (num, channels, length, height, width: Xiaomi2008/Caffe_3D_FF's net.cpp checks
        # input_size() * 5 == input_dim_size())
        per = 5 if names and len(dims) == 5 * len(names) else 4
        if not shapes and len(dims) != per * len(names):
            raise ProtoError("%s: %d net-level inputs but %d input_dim values (need 4 each: num, "
                             "channels, height, width; or 5 each, with a length, as the C3D forks)"
                             % (filename, len(names), len(dims)))
        layer = caffe_pb2.LayerParameter(name="input", type="Input", top=names)
        for i in range(len(names)):
            shape = layer.input_param.shape.add()
            if shapes:
                shape.CopyFrom(shapes[i])
            else:
                shape.dim.extend(dims[per * i:per * i + per])
        rest = list(net.layer)
        net.ClearField("layer")
        net.layer.extend([layer] + rest)
    net.ClearField("input")
    net.ClearField("input_shape")
    net.ClearField("input_dim")
    return net


def upgrade_batch_norm(net):
    """BatchNorm layers declaring 3 params (the old definition): lr_mult = decay_mult = 0."""
    for layer in net.layer:
        if layer.type == "BatchNorm" and len(layer.param) == 3:
            for spec in layer.param:
                spec.lr_mult = 0.0
                spec.decay_mult = 0.0
    return net


def upgrade_net(net, filename="<net>", raw_types=None):
    """Bring a NetParameter (text or binary, any vintage) to the current format, in place.

    Returns ``net``. Each step runs only when needed, in Caffe's order (see the module doc).
    When only the structure is read (:func:`caffepy.proto.harvest_policy.structure_only`), a V0
    type Caffe does not know and a V1 type the enum lacks (``raw_types``: {index in ``layers``:
    name}, from the text) become layers of that type name, for ``draw`` and ``summary`` to show;
    otherwise an unknown V0 type is an error.
    """
    from .harvest_policy import is_structure_only
    problems = []
    raw = dict(raw_types or {}) if is_structure_only() else None
    if net_needs_v0_upgrade(net):
        upgrade_v0_net(net, filename, problems, raw_types=raw)
    if net_needs_data_upgrade(net):
        upgrade_data_transformation(net)
    if net_needs_v1_upgrade(net):
        upgrade_v1_net(net, problems, filename, raw_types=raw)
    if net_needs_input_upgrade(net):
        upgrade_net_input(net, filename)
    if net_needs_batch_norm_upgrade(net):
        upgrade_batch_norm(net)
    if problems:
        log.warning("%s: upgraded with %d problem(s): %s", filename, len(problems),
                    "; ".join(problems))
    return net


def upgrade_solver_type(solver, filename="<solver>"):
    """``solver_type: NESTEROV`` → ``type: "Nesterov"``, in place."""
    if not solver.HasField("solver_type"):
        return solver
    if solver.HasField("type"):
        raise ProtoError("%s: both solver_type (deprecated enum) and type are given; keep only "
                         "type" % filename)
    solver.type = SOLVER_TYPES[solver.solver_type]
    solver.ClearField("solver_type")
    return solver


def upgrade_solver(solver, filename="<solver>"):
    """Bring a SolverParameter to the current format, in place (inline nets included)."""
    upgrade_solver_type(solver, filename)
    for field in ("net_param", "train_net_param"):
        if solver.HasField(field):
            upgrade_net(getattr(solver, field), "%s (%s)" % (filename, field))
    for i, net in enumerate(solver.test_net_param):
        upgrade_net(net, "%s (test_net_param %d)" % (filename, i))
    return solver
