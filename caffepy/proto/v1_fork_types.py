"""The current type strings of forks' own V1 layer types (``layers { type: ROIPOOLING }``).

Forks that added values to ``V1LayerParameter.LayerType`` rarely taught their
``UpgradeV1LayerType`` (``src/caffe/util/upgrade_proto.cpp``) about them; most left the value in
the schema and registered the layer under a type string only. Each row says where its string was
read:

* ``upgrade``: a ``case V1LayerParameter_LayerType_X: return "Y";`` line of the fork's
  ``UpgradeV1LayerType``;
* ``class``: the fork's ``UpgradeV1LayerType`` does not map the value (Caffe stops with "Unknown
  V1LayerParameter layer type"); the string is the ``REGISTER_LAYER_CLASS(Name)`` (or, where the
  class is not registered, the ``type()``) of the fork's layer whose name is the value's.

Where two forks give one name different numbers, caffepy's schema holds one of them; the row is
the fork whose number it holds (``NORM`` is Cambricon's 49, its Normalize; xiaolonw's NORM 41 is
its ``Norm`` layer). BVLC's own values (``V1_TYPES`` in :mod:`.upgrade`) win every clash.
"""

#: (V1 enum name, type string, fork, where the string was read)
FORK_V1_TYPES = (
    # Cambricon/caffe: UpgradeV1LayerType
    ("BATCH_NORM", "BatchNorm", "Cambricon/caffe", "upgrade"),
    ("BIAS", "Bias", "Cambricon/caffe", "upgrade"),
    ("CRELU", "CReLU", "Cambricon/caffe", "upgrade"),
    ("DETECTION_OUT", "DetectionOut", "Cambricon/caffe", "upgrade"),
    ("DETECTION_OUTPUT", "DetectionOutput", "Cambricon/caffe", "upgrade"),
    ("DETECTION_POSE_OUTPUT", "DetectionPoseOutput", "Cambricon/caffe", "upgrade"),
    ("ELU", "ELU", "Cambricon/caffe", "upgrade"),
    ("EMBED", "Embed", "Cambricon/caffe", "upgrade"),
    ("IMAGE_DETECT", "ImageDetect", "Cambricon/caffe", "upgrade"),
    ("INPUT", "Input", "Cambricon/caffe", "upgrade"),
    ("LOG", "Log", "Cambricon/caffe", "upgrade"),
    ("LSTM_RESHAPE", "LstmReshape", "Cambricon/caffe", "upgrade"),
    ("NMS", "Nms", "Cambricon/caffe", "upgrade"),
    ("NORM", "Normalize", "Cambricon/caffe", "upgrade"),
    ("PARAMETER", "Parameter", "Cambricon/caffe", "upgrade"),
    ("PERMUTE", "Permute", "Cambricon/caffe", "upgrade"),
    ("PRELU", "PReLU", "Cambricon/caffe", "upgrade"),
    ("PRIOR_BOX", "PriorBox", "Cambricon/caffe", "upgrade"),
    ("PRIORBOX", "PriorBox", "Cambricon/caffe", "upgrade"),
    ("PROPOSAL", "Proposal", "Cambricon/caffe", "upgrade"),
    ("PSROI_POOLING", "PSROIPooling", "Cambricon/caffe", "upgrade"),
    ("PYTHON", "Python", "Cambricon/caffe", "upgrade"),
    ("RECURRENT", "Recurrent", "Cambricon/caffe", "upgrade"),
    ("REDUCTION", "Reduction", "Cambricon/caffe", "upgrade"),
    ("REGION", "Region", "Cambricon/caffe", "upgrade"),
    ("REORG", "Reorg", "Cambricon/caffe", "upgrade"),
    ("RESHAPE", "Reshape", "Cambricon/caffe", "upgrade"),
    ("RESIZE_CROP", "Resizecrop", "Cambricon/caffe", "upgrade"),
    ("ROI_ALIGN", "ROIAlign", "Cambricon/caffe", "upgrade"),
    ("ROI_POOLING", "ROIPooling", "Cambricon/caffe", "upgrade"),
    ("RPN", "RPN", "Cambricon/caffe", "upgrade"),
    ("SCALE", "Scale", "Cambricon/caffe", "upgrade"),
    ("SHUFFLE_CHANNEL", "ShuffleChannel", "Cambricon/caffe", "upgrade"),
    ("SPP", "SPP", "Cambricon/caffe", "upgrade"),
    ("TRANSFORM", "Transformation", "Cambricon/caffe", "upgrade"),
    ("UPSAMPLE", "Upsample", "Cambricon/caffe", "upgrade"),
    ("YOLOV3", "Yolov3", "Cambricon/caffe", "upgrade"),
    ("YUVTONORMALIZEDGRAY", "YuvToNormalizedGray", "Cambricon/caffe", "upgrade"),
    ("YUVTORGB", "YuvToRgb", "Cambricon/caffe", "upgrade"),
    ("TILE", "Tile", "Cambricon/caffe", "class"),
    # UpgradeV1LayerType of other forks
    ("ACCURACYDISTANCE", "AccuracyDistance", "CamlinZ/face_alignment", "upgrade"),
    ("EUCLIDEANWEIGHT_LOSS", "EuclideanWeightLoss", "CamlinZ/face_alignment", "upgrade"),
    ("DATA_HEATMAP", "DataHeatmap", "MVIG-SJTU/RMPE", "upgrade"),
    ("EUCLIDEAN_LOSS_HEATMAP", "EuclideanLossHeatmap", "MVIG-SJTU/RMPE", "upgrade"),
    ("RANK_HARD_LOSS", "RankHardLoss", "xiaolonw/caffe-video_triplet", "upgrade"),
    ("PARSE_EVALUATE", "ParseEvaluate", "Betterthinking/caffe@36001c2", "upgrade"),
    ("PARSE_OUTPUT", "ParseOutput", "Betterthinking/caffe@36001c2", "upgrade"),
    # happynear/caffe-windows (also Aliang-SEU/MTCNN-on-caffe-window, Centerus/caffe-windows)
    ("BATCH_NORM", "BatchNorm", "happynear/caffe-windows", "class"),
    ("ELTWISE_AFFINE", "EltwiseAffine", "happynear/caffe-windows", "class"),
    ("INSANITY", "Insanity", "happynear/caffe-windows", "class"),
    ("LOCAL", "Local", "happynear/caffe-windows", "class"),
    ("NORMALIZE", "Normalize", "happynear/caffe-windows", "class"),
    ("ROIPOOLING", "ROIPooling", "happynear/caffe-windows", "class"),
    ("TRIPLET_LOSS", "TripletLoss", "happynear/caffe-windows", "class"),
    # registrations of single forks
    ("SMOOTH_L1_LOSS", "SmoothL1Loss", "ShaoqingRen/caffe@062f243", "class"),
    ("SELU", "SeLu", "jolibrain/caffe", "class"),
    ("SELU_DROPOUT", "SeLuDropout", "jolibrain/caffe", "class"),
    ("DICE_LOSS", "DiceCoefLoss", "jolibrain/caffe", "class"),
    ("CONADD", "Conadd", "busyboxs/roi_roi", "class"),
    ("SOFTMAX_LOSS_EXPECTATION", "SoftmaxWithLossExpectation", "abearman/whats-the-point1",
     "class"),
    ("SOFTMAX_LOSS_OBJECTNESS", "SoftmaxWithLossObjectness", "abearman/whats-the-point1",
     "class"),
    ("SOFTMAX_LOSS_OBJECTNESS_PRESENCE", "SoftmaxWithLossObjectnessPresence",
     "abearman/whats-the-point1", "class"),
    ("RELU6", "ReLU6", "eric612/MobileNet-YOLO", "class"),
    ("BLACKHOLE", "BlackHole", "BobLiu20/caffe", "class"),
    ("DEFORMABLECONVOLUTION", "DeformableConvolution", "dengshuo/D-M-F-ConvNets", "class"),
    ("DEPTH_WISE_CONVOLUTION", "DepthwiseConvolution", "CHANYUEPO/caffe-ssd", "class"),
    # (Label85's FaceImage class is registered in its caffe-addition/ tree)
    ("FACE_IMAGE", "FaceImage", "JoeFannie/Label85:caffe-master", "class"),
    ("TRIVER_LOSS", "TriVerLoss", "JoeFannie/Label85:caffe-master", "class"),
    ("TXTFEAT_DATA", "TxtFeatData", "JoeFannie/Label85:caffe-master", "class"),
    ("GATING_INNER_PRODUCT", "GatingInnerProduct", "mees/deep_adaptive_fusion", "class"),
    ("GETDATADIM", "GetDataDim", "ArcherFMY/caffe-sal-ensemble", "class"),
    ("INTRANORM", "Intranorm", "hyojinie/crn", "class"),
    ("NETVLAD", "Netvlad", "hyojinie/crn", "class"),
    ("SPFILTER", "Spfilter", "hyojinie/crn", "class"),
    ("L1_LOSS", "L1Loss", "k402xxxcenxxx/SICE", "class"),
    ("REGULARIZATION", "Regularization", "k402xxxcenxxx/SICE", "class"),
    ("SSIM_LOSS", "SSIMLoss", "k402xxxcenxxx/SICE", "class"),
    ("PCA_GET_COORD", "PcaGetCoord", "ALISCIFP/Segmentation:caffe-with-pcalayer", "class"),
    ("QUANT_TRUN", "Quant_Trun", "Ante-Su/RXGNet", "class"),
    ("TRUNC", "Trunc", "Ante-Su/RXGNet", "class"),
    ("SEMICONTRAST_LOSS", "SemiContrastLoss", "PKU-ICST-MIPL/CCL_TMM2018", "class"),
    ("SEMIPAIR_LOSS", "SemiPairLoss", "PKU-ICST-MIPL/CCL_TMM2018", "class"),
    ("SIGMOID_EUCLIDEAN_LOSS", "SigmoidEuclideanLoss", "zeakey/DeepSkeleton", "class"),
    ("WEIGHTED_SOFTMAX_LOSS", "WeightedSoftmaxWithLoss", "201power/caffe", "class"),
    # limuhit/CCN: the fork's layers that carry the value's name (most of its V1 values have none)
    ("BCODER_LOSS", "BcoderLoss", "limuhit/CCN", "class"),
    ("CONST_SCALE", "ConstScale", "limuhit/CCN", "class"),
    ("DIVERSITY_LOSS", "DiversityLoss", "limuhit/CCN", "class"),
    ("DTOW", "Dtow", "limuhit/CCN", "class"),
    ("ElEOPT", "EleOpt", "limuhit/CCN", "class"),
    ("LINEAR_MEAN_LOSS", "LinearMeanLoss", "limuhit/CCN", "class"),
    ("MEAN_LOSS", "MeanLoss", "limuhit/CCN", "class"),
    ("MLQUANT", "MLQuant", "limuhit/CCN", "class"),
    ("MTRANSPOSE", "MTranspose", "limuhit/CCN", "class"),
    ("MULTOBIN", "MulToBin", "limuhit/CCN", "class"),
    ("NSWITCH", "NSwitch", "limuhit/CCN", "class"),
    ("SWITCH", "Switch", "limuhit/CCN", "class"),
)

#: V1 names forks declare with no layer of theirs to map to: the upgrade keeps the enum name as
#: the type string (so the net fails to build, naming it).
UNMAPPED = {
    "limuhit/CCN": ("CEUCLIDEAN_LOSS", "COMPRATIO", "DOTMUL", "ENTROPY_LOSS", "ENTROPY_PACK",
                    "FAKE_LOSS", "IMPMAP", "LINEAR_QUANT", "MASK", "MBATCHNORM", "MDATA", "MERGE",
                    "MPATCH", "MRELU", "MSPLIT", "PEUCLIDEAN_LOSS", "ROUND", "TV_LOSS"),
    "zeakey/DeepSkeleton": ("SOFTMAX_WITH_LOSS5",),
}


#: Type strings of the table that no caffepy layer computes, with the reason (the upgrade still
#: maps them; building a net that uses one fails naming the type).
UNIMPLEMENTED = {
    "LstmReshape": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "Nms": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "Region": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "Resizecrop": "Cambricon/caffe: an MLU-only layer (no CPU reference)",
    "RPN": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "Transformation": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "YuvToNormalizedGray": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer "
                           "class)",
    "YuvToRgb": "Cambricon/caffe: an MLU-only layer (no CPU reference)",
    "Recurrent": "Cambricon/caffe: BVLC's abstract base of RNN / LSTM, not a layer by itself",
    "EuclideanWeightLoss": "CamlinZ/face_alignment: the fork writes its weights into a buffer's "
                           "diff and reads the buffer's (zero) data, so its loss and gradient are "
                           "always 0",
    "DeformableConvolution": "dengshuo/D-M-F-ConvNets: GPU-only, and its port groups channels by "
                             "the image height and calls its col2im with (height, width, "
                             "channels) for (channels, height, width): no coherent reference",
    "SemiPairLoss": "PKU-ICST-MIPL/CCL_TMM2018: declared in a header only (no source)",
    "DiversityLoss": "limuhit/CCN: declared in a header only (no source)",
    "EleOpt": "limuhit/CCN: declared in a header only (no source)",
    "LinearMeanLoss": "limuhit/CCN: declared in a header only (no source)",
    "MeanLoss": "limuhit/CCN: declared in a header only (no source)",
    "NSwitch": "limuhit/CCN: declared in a header only (no source)",
}


def fork_v1_types(enum):
    """{enum number: type string} for the rows whose name ``enum`` (a V1 LayerType) declares."""
    out = {}
    for name, new, _fork, _where in FORK_V1_TYPES:
        if name in enum.keys():
            out.setdefault(enum.Value(name), new)
    return out
