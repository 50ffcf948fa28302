"""What to do with fields caffepy's schema declares only because public Caffe forks define them.

caffe.proto declares the fields, messages and enum values of some hundred Caffe forks (the harvest,
``proto/harvest.json``), so their files parse and no such field is "unknown". caffepy does not
compute them: :data:`harvested_fields.json <TABLE>` names each with the forks defining it. A file
that sets one to a value other than its default is read according to the mode:

* structure only (:func:`structure_only`: ``caffepy summary``, ``caffepy draw``): accepted, with
  ONE WARNING per file naming the fields and their forks;
* strict (the default; train / test / time / Net construction / export): one error line,
  ``FILE:LINE: layer 'x': field 'pad_l' of ConvolutionParameter is known only from forks (a/b,
  +N): caffepy does not compute it; ...``;
* lenient (``--ignore-unknown-fields``, :func:`unknown_fields.lenient`): one WARNING; the field
  keeps its value and nothing reads it.

A field holding its default value changes nothing and is accepted silently. The check runs where
:func:`caffepy.proto.io.parse_text` reads text; line numbers come from the same token scan
:mod:`caffepy.proto.unknown_fields` uses. Harvested fields that a caffepy layer now reads are listed
in :data:`COMPUTED`: they are accepted like any field of caffepy's own schema; so is a fork's V1
layer type that upgrades to the type string of a caffepy layer (:mod:`caffepy.proto.v1_fork_types`).
With a fork's own schema loaded (``--proto``, :mod:`caffepy.proto.user_schema`), the harvested
fields and values its file defines are accepted.
"""
import contextlib
import contextvars
import json
import logging
import math
import os
import struct

from ..errors import ProtoError
from . import is_repeated
from . import unknown_fields as _unknown

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harvested_fields.json")
_log = logging.getLogger(__name__)
_STRUCTURE = contextvars.ContextVar("caffepy_structure_only", default=False)
_table = []
_LAYERS = ("LayerParameter", "V1LayerParameter", "V0LayerParameter")

# "Message.field" names of harvested fields that caffepy's fork layers compute: never refused.
COMPUTED = frozenset([
    # the OpenCL branch's MergeCrop and N-d MemoryData (caffepy/forks/segmentation/mergecrop.py)
    "LayerParameter.mergecrop_param", "MergeCropParameter.operation", "MergeCropParameter.forward",
    "MergeCropParameter.backward", "MemoryDataParameter.dim",
    "LayerParameter.hard_sigmoid_param", "HardSigmoidParameter.alpha", "HardSigmoidParameter.beta",
    "LayerParameter.scalar_param", "ScalarParameter.axis",
    "LayerParameter.insanity_param", "InsanityParameter.lb", "InsanityParameter.ub",
    "V1LayerParameter.insanity_param",
    # happynear/caffe-windows' TripletLoss, EltwiseAffine, Local (caffepy/forks/face/happynear.py)
    "LayerParameter.triplet_loss_param", "V1LayerParameter.triplet_loss_param",
    "TripletLossParameter.margin", "LayerParameter.eltwise_affine_param",
    "V1LayerParameter.eltwise_affine_param", "LayerParameter.local_param",
    "V1LayerParameter.local_param", "LocalParameter.num_output", "LocalParameter.bias_term",
    "LocalParameter.pad", "LocalParameter.kernel_size", "LocalParameter.stride",
    "LocalParameter.weight_filler", "LocalParameter.bias_filler",
    "LayerParameter.general_contrastive_loss_param",
    "GeneralContrastiveParameter.positive_margin", "GeneralContrastiveParameter.negative_margin",
    "GeneralContrastiveParameter.positive_weight", "GeneralContrastiveParameter.negative_weight",
    "GeneralContrastiveParameter.normalize_negative",
    "GeneralContrastiveParameter.positive_outlier_thresh",
    "GeneralContrastiveParameter.positive_first", "GeneralContrastiveParameter.positive_upper_bound",
    "GeneralContrastiveParameter.exp_negative_weight",
    "LayerParameter.imresize_param", "ImResizeParameter.target_spatial_width",
    "ImResizeParameter.target_spatial_height", "ImResizeParameter.factor",
    "ImResizeParameter.start_scale", "ImResizeParameter.scale_gap",
    # e2e_face's SpatialTransformer (caffepy/forks/misc/spatial_transformer.py)
    "LayerParameter.st_param", "SpatialTransformerParameter.transform_type",
    "SpatialTransformerParameter.sampler_type", "SpatialTransformerParameter.output_H",
    "SpatialTransformerParameter.output_W",
    # What's the Point's SoftmaxWithLossExpectation (caffepy/forks/segmentation/whats_the_point.py)
    "LossParameter.ignore_rank",
    # caffe-video_triplet's RankHardLoss (caffepy/forks/video/video_triplet.py)
    "LayerParameter.rank_param", "V1LayerParameter.rank_param", "RankParameter.neg_num",
    "RankParameter.pair_size", "RankParameter.hard_ratio", "RankParameter.rand_ratio",
    "RankParameter.margin",
    # jolibrain's DiceCoefLoss (caffepy/forks/segmentation/dice.py)
    "LayerParameter.dice_coef_loss_param", "DiceCoefLossParameter.generalization",
    "DiceCoefLossParameter.ignore_label",
    # RMPE's DataHeatmap (caffepy/forks/pose/rmpe.py)
    "LayerParameter.heatmap_data_param", "V1LayerParameter.heatmap_data_param",
    "HeatmapDataParameter.source", "HeatmapDataParameter.root_img_dir",
    "HeatmapDataParameter.batchsize", "HeatmapDataParameter.outsize",
    "HeatmapDataParameter.label_width", "HeatmapDataParameter.label_height",
    "HeatmapDataParameter.multfact", "HeatmapDataParameter.labelinds",
    "HeatmapDataParameter.bbox_or_centerscale", "HeatmapDataParameter.scale_width",
    "HeatmapDataParameter.scale_height", "HeatmapDataParameter.shuffle",
    "HeatmapDataParameter.segmentation", "HeatmapDataParameter.data_augment",
    "HeatmapDataParameter.angle_max", "HeatmapDataParameter.sample_per_cluster",
    # CReLU, Trunc, Quant_Trun (caffepy/forks/misc/fork_neurons.py)
    "LayerParameter.crelu_param", "V1LayerParameter.crelu_param", "CReLUParameter.negative_slope",
    "CReLUParameter.concat_axis", "CReLUParameter.engine", "LayerParameter.trunc_param",
    "V1LayerParameter.trunc_param", "TruncParameter.scale", "LayerParameter.quant_trun_param",
    "V1LayerParameter.quant_trun_param", "Quant_TrunParameter.quant",
    # Regularization, AccuracyDistance (caffepy/forks/misc/fork_losses.py)
    "LayerParameter.regularization_param",
    "RegularizationParameter.norm", "RegularizationParameter.method",
    "RegularizationParameter.regular", "RegularizationParameter.level1",
    "RegularizationParameter.level2", "RegularizationParameter.level3",
    "RegularizationParameter.level4", "RegularizationParameter.level5",
    "RegularizationParameter.level6", "RegularizationParameter.level7",
    "RegularizationParameter.value1", "RegularizationParameter.value2",
    "RegularizationParameter.value3", "RegularizationParameter.value4",
    "RegularizationParameter.value5", "RegularizationParameter.value6",
    "RegularizationParameter.value7", "RegularizationParameter.value8",
    "LayerParameter.accuracy_distance_param", "V1LayerParameter.accuracy_distance_param",
    "AccuracyDistanceParameter.dh", "AccuracyDistanceParameter.dw",
    "AccuracyDistanceParameter.axis", "AccuracyDistanceParameter.ignore_label",
    # limuhit/CCN's ConstScale, Dtow, MTranspose, MulToBin (caffepy/forks/misc/ccn.py)
    "LayerParameter.const_scale_param", "V1LayerParameter.const_scale_param",
    "ConstScaleParameter.scale", "ConstScaleParameter.bias", "LayerParameter.dtow_param",
    "V1LayerParameter.dtow_param", "DtowParameter.psize", "DtowParameter.method",
    "DtowParameter.ngroup", "LayerParameter.mtranspose_param", "V1LayerParameter.mtranspose_param",
    "MTransposeParameter.groups", "MTransposeParameter.inverse", "MTransposeParameter.width",
    "MTransposeParameter.height", "MTransposeParameter.channel", "LayerParameter.multobin_param",
    "V1LayerParameter.multobin_param", "MulToBinParameter.levels", "MulToBinParameter.mod",
    "MulToBinParameter.inverse", "MulToBinParameter.imp",
    # hyojinie/crn's Netvlad, Intranorm (caffepy/forks/misc/crn.py)
    "LayerParameter.netvlad_param", "V1LayerParameter.netvlad_param",
    "NetvladParameter.cluster_num", "NetvladParameter.local_dim", "NetvladParameter.vlad_dim",
    "NetvladParameter.weight_filler", "LayerParameter.intranorm_param",
    "V1LayerParameter.intranorm_param", "IntranormParameter.cluster_num",
    # Look into Person's ParseEvaluate (caffepy/forks/segmentation/lip.py)
    "LayerParameter.parse_evaluate_param", "ParseEvaluateParameter.num_labels",
    "ParseEvaluateParameter.ignore_label",
    # CCL's SemiContrastLoss (caffepy/forks/misc/fork_losses.py)
    "LayerParameter.semicontrast_loss_param", "V1LayerParameter.semicontrast_loss_param",
    "SemiContrastLossParameter.margin", "SemiContrastLossParameter.feature_index",
    "SemiContrastLossParameter.lambda",
    # Label85's TriVerLoss (caffepy/forks/face/label85.py)
    "LayerParameter.triver_loss_param", "TriVerLossParameter.k", "TriVerLossParameter.lamda",
    # SICE's SSIMLoss (caffepy/forks/misc/fork_losses.py)
    "LayerParameter.ssim_loss_param", "SSIMLossParameter.kernel_size", "SSIMLossParameter.stride",
    "SSIMLossParameter.c1", "SSIMLossParameter.c2",
    # Cambricon's ImageDetect (caffepy/forks/detection/cambricon.py)
    "LayerParameter.image_detect_param", "V1LayerParameter.image_detect_param",
    "ImageDetectParameter.engine", "ImageDetectParameter.num_class", "ImageDetectParameter.im_h",
    "ImageDetectParameter.im_w", "ImageDetectParameter.scale", "ImageDetectParameter.nms_thresh",
    "ImageDetectParameter.score_thresh",
    # Cambricon's DetectionOut (caffepy/forks/detection/cambricon.py)
    "LayerParameter.detection_out_param", "V1LayerParameter.detection_out_param",
    "DetectionOutParameter.side", "DetectionOutParameter.num_classes",
    "DetectionOutParameter.num_box", "DetectionOutParameter.coords",
    "DetectionOutParameter.confidence_threshold", "DetectionOutParameter.nms_threshold",
    "DetectionOutParameter.biases", "DetectionOutParameter.label_map_file",
    "DetectionOutParameter.engine",
    # Label85's TxtFeatData (caffepy/forks/face/label85.py)
    "LayerParameter.txtfeat_data_param", "TxtFeatDataParameter.source",
    "TxtFeatDataParameter.batch_size", "TxtFeatDataParameter.rand_skip",
    "TxtFeatDataParameter.shuffle", "TxtFeatDataParameter.feat_dim",
    "TxtFeatDataParameter.b_binary_file", "TxtFeatDataParameter.root_folder",
    "TxtFeatDataParameter.dislab_alpha",
    # Label85's FaceImage (caffepy/forks/face/label85.py) and its transform fields
    "LayerParameter.face_image_param", "FaceImageParameter.source",
    "FaceImageParameter.batch_size", "FaceImageParameter.rand_skip", "FaceImageParameter.shuffle",
    "FaceImageParameter.triplet_ver", "FaceImageParameter.root_folder",
    "TransformationParameter.rand_shift", "TransformationParameter.rand_s_width",
    "TransformationParameter.rand_s_height", "TransformationParameter.rand_noise",
    # limuhit/CCN's MLQuant (caffepy/forks/misc/ccn.py)
    "LayerParameter.mlquant_param", "V1LayerParameter.mlquant_param", "MLQuantParameter.groups",
    "MLQuantParameter.method",
    # PiCANet's AttPooling, PwAttend and ReNetLSTM (caffepy/forks/segmentation/picanet.py)
    "LayerParameter.att_pooling_param", "LayerParameter.renet_lstm_param",
    "ReNetLSTMParameter.direction", "ReNetLSTMParameter.num_output",
    "ReNetLSTMParameter.patch_width", "ReNetLSTMParameter.patch_height",
    "ReNetLSTMParameter.general_weight_filler", "ReNetLSTMParameter.general_bias_filler",
    "ReNetLSTMParameter.forget_gate_bias_filler", "ReNetLSTMParameter.input_gate_bias_filler",
    "ReNetLSTMParameter.output_gate_bias_filler", "ReNetLSTMParameter.peephole",
    # Cambricon's DetectionPoseOutput (caffepy/forks/detection/cambricon.py)
    "LayerParameter.detection_pose_output_param", "V1LayerParameter.detection_pose_output_param",
    "DetectionPoseOutputParameter.num_classes", "DetectionPoseOutputParameter.share_location",
    "DetectionPoseOutputParameter.background_label_id", "DetectionPoseOutputParameter.nms_param",
    "DetectionPoseOutputParameter.save_output_param", "DetectionPoseOutputParameter.code_type",
    "DetectionPoseOutputParameter.keep_top_k",
    "DetectionPoseOutputParameter.variance_encoded_in_target",
    "DetectionPoseOutputParameter.confidence_threshold", "DetectionPoseOutputParameter.visualize",
    "DetectionPoseOutputParameter.visualize_threshold", "DetectionPoseOutputParameter.num_poses",
    "DetectionPoseOutputParameter.share_pose",
    # NdConvolution / NdPooling (chuckcho/video-caffe; caffepy/forks/video/nd.py)
    "ConvolutionParameter.kernel_shape", "ConvolutionParameter.stride_shape",
    "ConvolutionParameter.pad_shape", "PoolingParameter.kernel_shape",
    "PoolingParameter.stride_shape", "PoolingParameter.pad_shape",
    # R-C3D's ROIPooling (caffepy/forks/video/rc3d.py)
    "ROIPoolingParameter.pooled_l", "ROIPoolingParameter.temporal_scale",
    # CropCenter (lltcggie/caffe; caffepy/forks/misc/waifu2x.py)
    "LayerParameter.crop_center_param", "CropCenterParameter.crop_size",
    # ColorConv (the colorization Caffe; caffepy/forks/misc/colorization.py)
    "LayerParameter.color_conv_param", "ColorConvParameter.input", "ColorConvParameter.output",
    # RRD's Extend and ORPooling (MhLiao/RRD; caffepy/forks/ssd/rrd.py)
    "LayerParameter.orn_param", "ORNParameter.orientations",
    # LiteFlowNet's NegSquare (twhui/LiteFlowNet; caffepy/forks/flownet/liteflownet.py): no fields
    "LayerParameter.negsquare_param",
    # MinReLU (ALISCIFP/caffe; caffepy/forks/misc/activations.py)
    "LayerParameter.minrelu_param", "MinReLUParameter.positive_slope", "MinReLUParameter.engine",
    # Tiling (SeokjuLee/VPGNet; caffepy/forks/misc/vision.py)
    "LayerParameter.tiling_param", "TilingParameter.tile_dim",
    # DeconvNet's 2014 layers (HyeonwooNoh/caffe; caffepy/forks/segmentation/deconvnet*.py)
    "LayerParameter.binary_accuracy_param", "V1LayerParameter.binary_accuracy_param",
    "BinaryAccuracyParameter.accuracy_mode", "LayerParameter.red_accuracy_param",
    "V1LayerParameter.red_accuracy_param", "RedAccuracyParameter.top_k",
    "RedAccuracyParameter.ignore_label", "RedAccuracyParameter.class_num",
    "LayerParameter.red_softmax_loss_param", "V1LayerParameter.red_softmax_loss_param",
    "RedSoftmaxWithLossParameter.class_num", "LayerParameter.select_seg_binary_param",
    "V1LayerParameter.select_seg_binary_param", "SelectSegBinaryParameter.cls_label_base",
    "LayerParameter.window_cls_data_param", "V1LayerParameter.window_cls_data_param",
    "WindowClsDataParameter.label_dim",
    # Viewpoints and Keypoints' 2014 layers (caffepy/forks/pose/viewpoints.py)
    "LayerParameter.euclidean_weight_param", "V1LayerParameter.euclidean_weight_param",
    "EuclideanWeightedLossParameter.lambda", "LayerParameter.mask_outputs_param",
    "V1LayerParameter.mask_outputs_param", "MaskOutputsParameter.kernel_size",
    # ArthurWang123/caffe's InvertGradient (caffepy/forks/misc/early_2014.py)
    "CoeffScheduleParameter.gamma", "LossParameter.coeff", "LayerParameter.condition_param",
    "V1LayerParameter.condition_param", "ConditionParameter.ge_than", "ConditionParameter.le_than",
    # AlfredXiangWu/caffe's 2014 face layers (caffepy/forks/face/verification_2014.py)
    "LayerParameter.distance_param", "V1LayerParameter.distance_param", "DistanceParameter.type",
    "LayerParameter.verification_param", "V1LayerParameter.verification_param",
    "VerificationParameter.m1", "VerificationParameter.m2", "LayerParameter.gaussian_noise_param",
    "V1LayerParameter.gaussian_noise_param", "GaussianNoiseParameter.std",
    "TripletLossParameter.alpha", "LayerParameter.binary_label_param",
    "V1LayerParameter.binary_label_param", "BinaryLabelParameter.negative_target",
    # Arroosh/optical_flow_prediction's MultiSoftmax(WithLoss) (forks/flownet/flow_prediction_2014)
    "LayerParameter.mult_softmax_param", "V1LayerParameter.mult_softmax_param",
    "MultiSoftmaxParameter.max_multiple", "LayerParameter.mult_softmax_loss_param",
    "V1LayerParameter.mult_softmax_loss_param", "MultiSoftmaxLossParameter.learning_multiple",
    "V1LayerParameter.resize_param", "ResizeParameter.is_pyramid_test",
    "ResizeParameter.out_height_scale", "ResizeParameter.out_width_scale",
    "ResizeParameter.multiple_scale",
    # 7hil/caffe's Onehot, Phoenix1327/caffe's SemiAccuracy (caffepy/forks/misc/early_2014.py)
    "LayerParameter.onehot_param", "V1LayerParameter.onehot_param", "OnehotParameter.dim",
    "OnehotParameter.invert_coding", "LayerParameter.label_transform_param",
    "V1LayerParameter.label_transform_param", "LabelTransformParameter.label_transform_file",
])


def table():
    """{"Message.field" or "Message.field=VALUE": {"forks": [first five], "count": n, ...}}."""
    if not _table:
        try:
            with open(TABLE) as f:
                _table.append(json.load(f))
        except FileNotFoundError:
            _table.append({})
    return _table[0]


@contextlib.contextmanager
def structure_only(enabled=True):
    """Within the block, harvested fields are accepted with one WARNING per file: for commands that
    only read a net's structure (summary, draw)."""
    token = _STRUCTURE.set(bool(enabled))
    try:
        yield
    finally:
        _STRUCTURE.reset(token)


def is_structure_only():
    return _STRUCTURE.get()


class Harvested:
    """One harvested field set to a non-default value (or a harvested enum value)."""
    __slots__ = ("message", "field", "path", "layer", "value", "entry", "line")

    def __init__(self, message, field, path, layer, entry, value=None):
        self.message, self.field, self.path, self.layer = message, field, path, layer
        self.entry, self.value, self.line = entry, value, None

    def forks(self, shown=2):
        names = self.entry["forks"][:shown]
        more = self.entry["count"] - len(names)
        return ", ".join(names + (["+%d" % more] if more > 0 else []))

    def what(self):
        if self.value is None:
            return "field '%s' of %s" % (self.field, self.message)
        return "value %s of field '%s' of %s" % (self.value, self.field, self.message)

    def brief(self):
        where = " (layer '%s')" % self.layer if self.layer else ""
        value = "=%s" % self.value if self.value is not None else ""
        return "%s.%s%s%s [%s]" % (self.message, self.field, value, where, self.forks())


def _full(desc):
    name = desc.full_name
    return name.split(".", 1)[1] if "." in name else name


def _same(fd, a, b):
    if fd.type == fd.TYPE_FLOAT:
        a, b = (struct.unpack("<f", struct.pack("<f", float(x)))[0] for x in (a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _parse_default(fd, text):
    """A fork's default (as protoc wrote it; "" for the type's zero) as a field value."""
    if fd.enum_type is not None:
        value = fd.enum_type.values_by_name.get(text) if text else fd.enum_type.values[0]
        return value.number if value is not None else None
    if fd.type in (fd.TYPE_FLOAT, fd.TYPE_DOUBLE):
        return float(text) if text else 0.0
    if fd.type == fd.TYPE_BOOL:
        return text == "true"
    if fd.type == fd.TYPE_STRING:
        return text
    if fd.type == fd.TYPE_BYTES:
        return text.encode("latin-1", "backslashreplace")
    return int(text) if text else 0


def _message_is_default(msg):
    return all(_is_default(fd, value) for fd, value in msg.ListFields())


def _is_default(fd, value, fork_default=None):
    """Whether ``value`` of field ``fd`` changes nothing: its default (for a field caffepy declares
    repeated where forks have it optional, every element the forks' default)."""
    if fd.message_type is not None:
        values = value if is_repeated(fd) else [value]
        return all(_message_is_default(v) for v in values)
    if is_repeated(fd):
        if fork_default is None:
            return False
        default = _parse_default(fd, fork_default)
        return all(_same(fd, v, default) for v in value)
    return _same(fd, value, fd.default_value)


def _v1_type_computed(number):
    """Whether a fork's V1 layer type upgrades (caffepy.proto.v1_fork_types) to a type string a
    caffepy layer class computes."""
    from ..layers import base
    from .upgrade import V1_TYPES
    name = V1_TYPES.get(number)
    if not name:
        return False
    base.load_all()
    return base.has_layer_type(name)


def find_harvested(msg):
    """Every harvested field ``msg`` (and its sub-messages) sets to a non-default value, and every
    harvested enum value it holds: :class:`Harvested` records (field path, layer name, forks)."""
    out = []
    if table():
        _walk(msg, [], None, out, table())
    return out


def _walk(msg, path, layer, out, tab):
    desc = msg.DESCRIPTOR
    mname = _full(desc)
    if desc.name in _LAYERS and msg.name:
        layer = msg.name
    for fd, value in msg.ListFields():
        key = "%s.%s" % (mname, fd.name)
        fpath = path + [fd.name]
        entry = tab.get(key) if key not in COMPUTED else None
        if entry is not None:
            if not _is_default(fd, value, entry.get("default")):
                out.append(Harvested(mname, fd.name, ".".join(fpath), layer, entry))
            continue
        values = value if is_repeated(fd) else [value]
        if fd.enum_type is not None:
            for v in values:
                ev = fd.enum_type.values_by_number.get(v)
                entry = tab.get("%s=%s" % (key, ev.name)) if ev is not None else None
                if entry is not None and key == "V1LayerParameter.type" and _v1_type_computed(v):
                    entry = None
                if entry is not None:
                    out.append(Harvested(mname, fd.name, ".".join(fpath), layer, entry, ev.name))
                    break
        elif fd.message_type is not None:
            for sub in values:
                _walk(sub, fpath, layer, out, tab)


def _locate(found, text, descriptor):
    """Set each record's ``line`` from the text scan (the first matching occurrence)."""
    try:
        seen = _unknown.known_fields(text, descriptor)
    except (IndexError, ValueError):
        return
    used = set()
    for rec in found:
        for i, (desc, name, line, _, layer) in enumerate(seen):
            if i not in used and name == rec.field and _full(desc) == rec.message and (
                    rec.layer is None or layer is None or layer == rec.layer):
                rec.line = line
                used.add(i)
                break


def _fork_defines(rec):
    """Whether the fork schema loaded with --proto (caffepy.proto.user_schema) defines the field or
    value: the user named the fork whose nets these are (a --layers plug-in computes it)."""
    from . import user_schema
    schema = user_schema.active()
    key = "%s.%s%s" % (rec.message, rec.field, "=%s" % rec.value if rec.value is not None else "")
    return schema is not None and key in schema.defines


def check(msg, text, filename, strict):
    """Apply the policy (module doc) to ``msg``, just parsed from ``text``; raises ProtoError in
    strict mode, else logs one WARNING when a harvested field is set."""
    found = [r for r in find_harvested(msg) if not _fork_defines(r)]
    if not found:
        return msg
    _locate(found, text, msg.DESCRIPTOR)
    found.sort(key=lambda r: (r.line is None, r.line or 0))
    if is_structure_only():
        _log.warning("%s: %d field(s) known only from Caffe forks, read for the structure only "
                     "(caffepy does not compute them): %s", filename, len(found),
                     "; ".join(r.brief() for r in found))
    elif strict:
        first = found[0]
        loc = "%s:%d" % (filename, first.line) if first.line else filename
        layer = " layer '%s':" % first.layer if first.layer else ""
        more = " (%d more such field(s) in this file)" % (len(found) - 1) if len(found) > 1 else ""
        raise ProtoError("%s:%s %s is known only from forks (%s): caffepy does not compute it; use "
                         "--ignore-unknown-fields to build without it, or --proto FORK/caffe.proto "
                         "/ a --layers plug-in%s" % (loc, layer, first.what(), first.forks(), more))
    else:
        _log.warning("%s: ignored %d field(s) known only from Caffe forks (--ignore-unknown-fields; "
                     "caffepy does not compute them): %s", filename, len(found),
                     "; ".join(r.brief() for r in found))
    return msg
