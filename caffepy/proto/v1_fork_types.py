"""The current type strings of forks' own V1 layer types (``layers { type: ROIPOOLING }``).

Forks that added values to ``V1LayerParameter.LayerType`` rarely taught their
``UpgradeV1LayerType`` (``src/caffe/util/upgrade_proto.cpp``) about them; most left the value in
the schema and registered the layer under a type string only. Each row says where its string was
read:

* ``upgrade``: a ``case V1LayerParameter_LayerType_X: return "Y";`` line of the fork's
  ``UpgradeV1LayerType``;
* ``class``: the fork's ``UpgradeV1LayerType`` does not map the value (Caffe stops with "Unknown
  V1LayerParameter layer type"); the string is the ``REGISTER_LAYER_CLASS(Name)`` (or, where the
  class is not registered, the ``type()``) of the fork's layer whose name is the value's;
* ``factory``: a 2014 fork from before type strings (its ``LayerParameter`` still had the
  ``LayerType`` enum that BVLC later renamed ``V1LayerParameter.LayerType``). Its layer factory
  builds class ``XLayer`` for the value -- a ``case LayerParameter_LayerType_V: return new
  XLayer`` of ``GetLayer`` (``src/caffe/layer_factory.cpp``), a ``REGISTER_LAYER_CLASS(V,
  XLayer)`` of the enum-keyed registry of mid-2014, or the class whose ``type()`` returns the
  value -- and the string is ``X``, the name BVLC gave each ``XLayer`` when it moved to strings.

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
    # dengshuo's own port reads the image height from the channel axis and its width from the
    # batch axis (no coherent reference); the type builds makefile/frcnn's DeformableConvolution
    ("DEFORMABLECONVOLUTION", "DeformableConvolution", "dengshuo/D-M-F-ConvNets", "class"),
    ("DEPTH_WISE_CONVOLUTION", "DepthwiseConvolution", "CHANYUEPO/caffe-ssd", "class"),
    # the V1 name of the gradient-reversal layer (its fork registers the class GradientScaler)
    ("GRADIENT_SCALER", "GradientScaler", "madiken/skaffe_private_old", "class"),
    ("MINE_CONTRASTIVE_LOSS", "MineContrastiveLoss", "sanjeev87/CaffeExp", "factory"),
    ("CLASSIFICATION_STATS", "ClassificationStats", "eevignesh/vigneshcaffe", "factory"),
    # REGISTER_LAYER_CLASS(WEIGHTED_EUCLIDEAN_LOSS, WeightedEuclideanLossLayer), branch pose
    ("WEIGHTED_EUCLIDEAN_LOSS", "WeightedEuclideanLoss", "dementrock/caffe", "factory"),
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
    # 2014 forks' LayerParameter.LayerType values (declared in V1LayerParameter.LayerType)
    # HyeonwooNoh/caffe@6f4eda1 / @d9e8494 (DeconvNet): REGISTER_LAYER_CLASS(VALUE, XLayer)
    ("SELECT_SEG_BINARY", "SelectSegBinary", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("WINDOW_SEG_BINARY", "WindowSegBinary", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("BIN_ACCURACY", "BinaryAccuracy", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("DROPOUT_CHANNEL", "DropoutChannel", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("RED_ACCURACY", "RedAccuracy", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("RED_SOFTMAX_LOSS", "RedSoftmaxWithLoss", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("WINDOW_CLS_DATA", "WindowClsData", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("WINDOW_INST_SEG_DATA", "WindowInstSegData", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("SEG_BINARY_CTRL", "SegBinaryCtrl", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    ("SEG_CTRL_CLS", "SegCtrlCls", "HyeonwooNoh/caffe@6f4eda1", "factory"),
    # ArthurWang123/caffe@3e28456: GetLayer (its DataAugmentation is FlowNet's ancestor, the same
    # augmentation_param / coeff_schedule_param)
    ("CONVOLUTION_ORTH", "ConvolutionOrth", "ArthurWang123/caffe@3e28456", "factory"),
    ("DATA_AUGMENTATION", "DataAugmentation", "ArthurWang123/caffe@3e28456", "factory"),
    ("DATA_LOAD_AND_AUGMENT", "DataLoadAndAugment", "ArthurWang123/caffe@3e28456", "factory"),
    ("DECONVOLUTION_ORTH", "DeConvolutionOrth", "ArthurWang123/caffe@3e28456", "factory"),
    ("HDF5_DATA_COUPLES", "HDF5DataCouples", "ArthurWang123/caffe@3e28456", "factory"),
    ("IM2PERPIXEL", "Im2perPixel", "ArthurWang123/caffe@3e28456", "factory"),
    ("INNER_PRODUCT_ORTH", "InnerProductOrth", "ArthurWang123/caffe@3e28456", "factory"),
    ("INVERT_GRADIENT", "InvertGradient", "ArthurWang123/caffe@3e28456", "factory"),
    ("LABEL_TO_ONEHOT", "LabelToOnehot", "ArthurWang123/caffe@3e28456", "factory"),
    ("SOFTMAX_CONDITION_LOSS", "SoftmaxConditionWithLoss", "ArthurWang123/caffe@3e28456",
     "factory"),
    ("SOFTMAX_ENTROPY_LOSS", "SoftmaxEntropyLoss", "ArthurWang123/caffe@3e28456", "factory"),
    ("SOFTMAX_KL_LOSS", "SoftmaxKLLoss", "ArthurWang123/caffe@3e28456", "factory"),
    ("SOFTMAX_MULTILABEL_LOSS", "SoftmaxMultilabelLoss", "ArthurWang123/caffe@3e28456",
     "factory"),
    ("SUBSPACEPOOLING", "SubspacePooling", "ArthurWang123/caffe@3e28456", "factory"),
    # iamyup/caffe_tdd: GetLayer, else the class whose type() returns the value
    ("SEQUENCE_DATA", "SequenceData", "iamyup/caffe_tdd", "factory"),
    ("ACCURACY_TREE", "AccuracyTree", "iamyup/caffe_tdd", "factory"),
    ("LABEL_TRANSFORM", "LabelTransform", "iamyup/caffe_tdd", "factory"),
    ("MAP_REGRESSION_LOSS", "MapRegressionLoss", "iamyup/caffe_tdd", "factory"),
    ("MULTI_LABEL_ACCURACY", "MultiLabelAccuracy", "iamyup/caffe_tdd", "factory"),
    ("MULTI_LABEL_LOSS", "MultiLabelLoss", "iamyup/caffe_tdd", "factory"),
    ("TILED_CONVOLUTION", "TiledConvolution", "iamyup/caffe_tdd", "factory"),
    ("TILED_INNERPRODUCT", "TiledInnerProduct", "iamyup/caffe_tdd", "factory"),
    ("TRANSFORM_SOFTMAX_LOSS", "TransformSoftmaxWithLoss", "iamyup/caffe_tdd", "factory"),
    # (its TransformAccuracyLayer's type() says ACCURACY: the class of the value's name)
    ("TRANSFORM_ACCURACY", "TransformAccuracy", "iamyup/caffe_tdd", "class"),
    # (iamyup/caffe_tdd's CompactDataLayer says DATA; ChenglongChen's factory builds it)
    ("COMPACT_DATA", "CompactData", "ChenglongChen/caffe-windows", "factory"),
    # shubhtuls/ViewpointsAndKeypoints: REGISTER_LAYER_CLASS(VALUE, XLayer)
    ("EUCLIDEAN_WEIGHTED_LOSS", "EuclideanWeightedLoss", "shubhtuls/ViewpointsAndKeypoints",
     "factory"),
    ("MASK_OUTPUTS", "MaskOutputs", "shubhtuls/ViewpointsAndKeypoints", "factory"),
    ("WINDOW_MULTICLASS_KEYPOINT_DATA", "WindowMulticlassKeypointData",
     "shubhtuls/ViewpointsAndKeypoints", "factory"),
    ("WINDOW_POSE_DATA", "WindowPoseData", "shubhtuls/ViewpointsAndKeypoints", "factory"),
    # Arroosh/optical_flow_prediction: GetLayer
    ("IMAGE_MULTILABEL_DATA", "ImageMultiLabelData", "Arroosh/optical_flow_prediction", "factory"),
    ("MULTI_SOFTMAX", "MultiSoftmax", "Arroosh/optical_flow_prediction", "factory"),
    ("MULTI_SOFTMAX_LOSS", "MultiSoftmaxWithLoss", "Arroosh/optical_flow_prediction", "factory"),
    ("RESIZE", "Resize", "Arroosh/optical_flow_prediction", "factory"),
    # AlfredXiangWu/caffe@4f68f20: GetLayer (its L2Normalize is caffepy's: x / (|x| + 1e-7) per
    # sample, caffepy's x / sqrt(|x|^2 + 1e-7))
    ("BINARY_LABEL", "BinaryLabel", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("CHAR_SEQ_DATA", "CharSeqData", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("DETECTION_ACC", "DetectionAcc", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("DISTANCE", "Distance", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("DISTANCE_LOSS", "DistanceLoss", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("FRACTIONAL_MAP", "FractionalMap", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("GAUSSIAN_NOISE", "GaussianNoise", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("L2_NORMALIZE", "L2Normalize", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("PAIR_DATA", "PairData", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("TRIPLET_ACCURACY", "TripletAccuracy", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("TRIPLET_DATA", "TripletData", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("VERIFICATION_ACCURACY", "VerificationAccuracy", "AlfredXiangWu/caffe@4f68f20", "factory"),
    ("VERIFICATION_LOSS", "VerificationLoss", "AlfredXiangWu/caffe@4f68f20", "factory"),
    # YutingZhang/fgs-obj: GetLayerCustom (src/caffe/layer_factory_custom.cpp)
    ("NAN2ZERO", "NaN2Zero", "YutingZhang/fgs-obj", "factory"),
    ("FAST_WINDOW_DATA", "FastWindowData", "YutingZhang/fgs-obj", "factory"),
    # single values of other forks: GetLayer / REGISTER_LAYER_CLASS(VALUE, XLayer)
    ("SEMI_ACCURACY", "SemiAccuracy", "Phoenix1327/caffe", "factory"),
    ("SEMI_LOSS", "SemiLoss", "Phoenix1327/caffe", "factory"),
    ("ONEHOT", "Onehot", "7hil/caffe@196e936", "factory"),
    ("REGULARIZER_AS_LOSS", "RegularizerAsLoss", "longjon/caffe@db32b56", "factory"),
    ("SOFTMAX_LOSS_WITH_INVALID", "SoftmaxLossWithInvalid", "bogger/caffe-multigpu", "factory"),
)

#: V1 names forks declare with no layer of theirs to map to: the upgrade keeps the enum name as
#: the type string (so the net fails to build, naming it).
UNMAPPED = {
    "limuhit/CCN": ("CEUCLIDEAN_LOSS", "COMPRATIO", "DOTMUL", "ENTROPY_LOSS", "ENTROPY_PACK",
                    "FAKE_LOSS", "IMPMAP", "LINEAR_QUANT", "MASK", "MBATCHNORM", "MDATA", "MERGE",
                    "MPATCH", "MRELU", "MSPLIT", "PEUCLIDEAN_LOSS", "ROUND", "TV_LOSS"),
    "zeakey/DeepSkeleton": ("SOFTMAX_WITH_LOSS5",),
    # 2014 forks whose factory builds nothing for these and that have no class of their name
    "YutingZhang/fgs-obj": ("BINARY_OUTPUT", "IGNORE", "IMAGEDB_DATA", "L2SVM_LOSS", "LOCAL_LAYER",
                            "ORDER_L2SVM_LOSS", "SIAMESE_LOSS", "SVM_WITH_NEG",
                            "TWO_CLASS_ACCURACY"),
    "iamyup/caffe_tdd": ("SOFTMAX_LOSS_TREE",),
    "shubhtuls/ViewpointsAndKeypoints": ("WINDOW_AMODAL_DATA", "WINDOW_POSE_SIMILARITY_DATA",
                                         "WINDOW_SYNTHETIC_DATA"),
    # a net-level macro its expand_templates.cpp expands before the net is built, not a layer
    "7hil/caffe@a6765d2": ("TEMPLATE",),
    # its AccumLayer is a running mean over iterations (accum_param discount_coeff, init_alpha);
    # caffepy's Accum is FlowNet 2's resize-and-stack, so the value keeps its name
    "ArthurWang123/caffe@3e28456": ("ACCUM",),
}


#: Type strings of the table that no caffepy layer computes, with the reason (the upgrade still
#: maps them; building a net that uses one fails naming the type).
UNIMPLEMENTED = {
    "LstmReshape": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "Nms": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "Resizecrop": "Cambricon/caffe: an MLU-only layer (no CPU reference)",
    "Transformation": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer class)",
    "YuvToNormalizedGray": "Cambricon/caffe: only a name in its UpgradeV1LayerType (no layer "
                           "class)",
    "YuvToRgb": "Cambricon/caffe: an MLU-only layer (no CPU reference)",
    "Recurrent": "Cambricon/caffe: BVLC's abstract base of RNN / LSTM, not a layer by itself",
    "EuclideanWeightLoss": "CamlinZ/face_alignment: the fork writes its weights into a buffer's "
                           "diff and reads the buffer's (zero) data, so its loss and gradient are "
                           "always 0",
    "SemiPairLoss": "PKU-ICST-MIPL/CCL_TMM2018: declared in a header only (no source)",
    "DiversityLoss": "limuhit/CCN: declared in a header only (no source)",
    "EleOpt": "limuhit/CCN: declared in a header only (no source)",
    "LinearMeanLoss": "limuhit/CCN: declared in a header only (no source)",
    "MeanLoss": "limuhit/CCN: declared in a header only (no source)",
    "NSwitch": "limuhit/CCN: declared in a header only (no source)",
    # 2014 forks' layers (rows with source "factory"), most-used first when ported
    "WindowClsData":
        "HyeonwooNoh/caffe: a data layer of its own file formats; not ported",
    "WindowInstSegData":
        "HyeonwooNoh/caffe: a data layer of its own file formats; not ported",
    "SegBinaryCtrl":
        "HyeonwooNoh/caffe@6f4eda1: a data layer of its own file formats; not ported",
    "SegCtrlCls":
        "HyeonwooNoh/caffe@6f4eda1: a data layer of its own file formats; not ported",
    "DataLoadAndAugment":
        "ArthurWang123/caffe@3e28456: a data layer of its own file formats; not ported",
    "HDF5DataCouples":
        "ArthurWang123/caffe@3e28456: a data layer of its own file formats; not ported",
    "SequenceData":
        "iamyup/caffe_tdd: a data layer of its own file formats; not ported",
    "CompactData":
        "ChenglongChen/caffe-windows: a data layer of its own file formats; not ported",
    "WindowMulticlassKeypointData":
        "shubhtuls/ViewpointsAndKeypoints: a data layer of its own file formats; not ported",
    "WindowPoseData":
        "shubhtuls/ViewpointsAndKeypoints: a data layer of its own file formats; not ported",
    "ImageMultiLabelData":
        "Arroosh/optical_flow_prediction: a data layer of its own file formats; not ported",
    "CharSeqData":
        "AlfredXiangWu/caffe@4f68f20: a data layer of its own file formats; not ported",
    "PairData":
        "AlfredXiangWu/caffe@4f68f20: a data layer of its own file formats; not ported",
    "TripletData":
        "AlfredXiangWu/caffe@4f68f20: a data layer of its own file formats; not ported",
    "FastWindowData":
        "YutingZhang/fgs-obj: a data layer of its own file formats; not ported",
    "ConvolutionOrth":
        "ArthurWang123/caffe@3e28456: a layer that re-projects its weights every "
        "orth_param.step TRAIN iterations (Esmaeili orthogonalisation, L2 / L1 norms); "
        "not ported yet",
    "DeConvolutionOrth":
        "ArthurWang123/caffe@3e28456: a layer that re-projects its weights every "
        "orth_param.step TRAIN iterations (Esmaeili orthogonalisation, L2 / L1 norms); "
        "not ported yet",
    "InnerProductOrth":
        "ArthurWang123/caffe@3e28456: a layer that re-projects its weights every "
        "orth_param.step TRAIN iterations (Esmaeili orthogonalisation, L2 / L1 norms); "
        "not ported yet",
    "AccuracyTree":
        "iamyup/caffe_tdd: accuracies along a tree of classifiers read from label transform "
        "files; not ported yet",
    "MapRegressionLoss":
        "iamyup/caffe_tdd: its backward writes the gradient into the bottom's data, not its "
        "diff (no gradient reaches the net, the map is overwritten)",
    "TiledConvolution":
        "iamyup/caffe_tdd: weights shared only within tiles of the map; not ported yet",
    "TiledInnerProduct":
        "iamyup/caffe_tdd: weights shared only within tiles of the map; not ported yet",
    "DetectionAcc": "AlfredXiangWu/caffe@4f68f20: not ported yet",
    "DistanceLoss":
        "AlfredXiangWu/caffe@4f68f20: for pairs of different labels its gradient has the "
        "wrong sign ((m2 - d) / N for the loss (m2 - d)^2 / 2N), and it ignores the loss weight",
    "FractionalMap": "AlfredXiangWu/caffe@4f68f20: not ported yet",
    "SemiLoss":
        "Phoenix1327/caffe: a multiple-instance loss whose bag terms depend on the order of "
        "the items; not ported yet",
    "RegularizerAsLoss":
        "longjon/caffe@db32b56: a loss of the fork's per-layer regularizers (its "
        "LayerParameter.regularizer, applied by its Layer base); not ported",
}


def fork_v1_types(enum):
    """{enum number: type string} for the rows whose name ``enum`` (a V1 LayerType) declares."""
    out = {}
    for name, new, _fork, _where in FORK_V1_TYPES:
        if name in enum.keys():
            out.setdefault(enum.Value(name), new)
    return out
