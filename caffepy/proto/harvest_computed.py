"""The harvested fields caffepy's fork layers compute (``"Message.field"`` names, and
``"Message.field=VALUE"`` for a harvested enum value): never refused,
in strict mode as in structure-only mode (:mod:`caffepy.proto.harvest_policy`). Each group names
the fork and the module that computes it. :data:`COMPUTED` is the union of the groups here (the
miscellaneous and face forks, the fillers, the solvers and the forks' engine values) and
:data:`~caffepy.proto.harvest_computed_vision.VISION_COMPUTED` (the detection, segmentation, SSD,
pose, video and optical-flow forks)."""

from .harvest_computed_vision import VISION_COMPUTED

# "Message.field" names of harvested fields that caffepy's fork layers compute: never refused.
COMPUTED = VISION_COMPUTED | frozenset([
    # happynear/caffe-windows' TripletLoss, EltwiseAffine, Local (caffepy/forks/face/happynear.py)
    "LayerParameter.triplet_loss_param", "V1LayerParameter.triplet_loss_param",
    "TripletLossParameter.margin", "LayerParameter.eltwise_affine_param",
    "V1LayerParameter.eltwise_affine_param", "EltwiseAffineParameter.slope_filler",
    "EltwiseAffineParameter.bias_filler", "EltwiseAffineParameter.channel_shared",
    "LayerParameter.local_param",
    "V1LayerParameter.local_param", "LocalParameter.num_output", "LocalParameter.bias_term",
    "LocalParameter.pad", "LocalParameter.kernel_size", "LocalParameter.stride",
    "LocalParameter.weight_filler", "LocalParameter.bias_filler",
    "LayerParameter.general_contrastive_loss_param",
    "GeneralContrastiveParameter.positive_margin", "GeneralContrastiveParameter.negative_margin",
    "GeneralContrastiveParameter.positive_weight", "GeneralContrastiveParameter.negative_weight",
    "GeneralContrastiveParameter.normalize_negative",
    "GeneralContrastiveParameter.positive_outlier_thresh",
    "GeneralContrastiveParameter.positive_first",
    "GeneralContrastiveParameter.positive_upper_bound",
    "GeneralContrastiveParameter.exp_negative_weight",
    "LayerParameter.imresize_param", "ImResizeParameter.target_spatial_width",
    "ImResizeParameter.target_spatial_height", "ImResizeParameter.factor",
    "ImResizeParameter.start_scale", "ImResizeParameter.scale_gap",
    # the point-cloud forks' TensorTranspose (caffepy/forks/misc/tensor_transpose.py)
    "LayerParameter.tensor_transpose_param", "TensorTransposeParameter.order",
    # yjxiong/caffe (temporal segment networks) and its copies: Eltwise's STOCHASTIC_SUM
    # (caffepy/forks/video/tsn.py); the net's mem_param (blobs sharing memory: the fork's net
    # computes the same values; caffepy keeps every blob), the solver's richness (cuDNN's
    # workspace limit) and group_id (MPI ranks to devices), which change no value
    "EltwiseParameter.operation=STOCHASTIC_SUM", "NetParameter.mem_param",
    "MemoryOptimizationParameter.optimize_train", "MemoryOptimizationParameter.optimize_test",
    "MemoryOptimizationParameter.exclude_blob", "SolverParameter.richness",
    "SolverParameter.group_id",
    # Cysu/dgd_person_reid's GuidedDropout (caffepy/forks/misc/dropout.py)
    "LayerParameter.guided_dropout_param", "GuidedDropoutParameter.type",
    "GuidedDropoutParameter.guidance_threshold", "GuidedDropoutParameter.sigmoid_scaler",
    # the guided-policy-search forks' SpatialSoftmax (caffepy/forks/misc/spatial_softmax.py)
    "LayerParameter.spatial_softmax_param", "SpatialSoftmaxParameter.temperature",
    "SpatialSoftmaxParameter.engine",
    # e2e_face's SpatialTransformer (caffepy/forks/misc/spatial_transformer.py)
    "LayerParameter.st_param", "SpatialTransformerParameter.transform_type",
    "SpatialTransformerParameter.sampler_type", "SpatialTransformerParameter.output_H",
    "SpatialTransformerParameter.output_W",
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
    # CCL's SemiContrastLoss (caffepy/forks/misc/fork_losses.py)
    "LayerParameter.semicontrast_loss_param", "V1LayerParameter.semicontrast_loss_param",
    "SemiContrastLossParameter.margin", "SemiContrastLossParameter.feature_index",
    "SemiContrastLossParameter.lambda",
    # Label85's TriVerLoss (caffepy/forks/face/label85.py)
    "LayerParameter.triver_loss_param", "TriVerLossParameter.k", "TriVerLossParameter.lamda",
    # liu-xb/RAM's HashingLoss and SetLoss2 (caffepy/forks/misc/ram_losses.py)
    "LayerParameter.hashing_loss_param", "HashingLossParameter.bi_margin",
    "HashingLossParameter.tradeoff", "LayerParameter.set_loss2_param", "SetLoss2Parameter.alpha",
    # SICE's SSIMLoss (caffepy/forks/misc/fork_losses.py)
    "LayerParameter.ssim_loss_param", "SSIMLossParameter.kernel_size", "SSIMLossParameter.stride",
    "SSIMLossParameter.c1", "SSIMLossParameter.c2",
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
    # CropCenter (lltcggie/caffe; caffepy/forks/misc/waifu2x.py)
    "LayerParameter.crop_center_param", "CropCenterParameter.crop_size",
    # ColorConv (the colorization Caffe; caffepy/forks/misc/colorization.py)
    "LayerParameter.color_conv_param", "ColorConvParameter.input", "ColorConvParameter.output",
    # MinReLU (ALISCIFP/caffe; caffepy/forks/misc/activations.py)
    "LayerParameter.minrelu_param", "MinReLUParameter.positive_slope", "MinReLUParameter.engine",
    # Tiling (SeokjuLee/VPGNet; caffepy/forks/misc/vision.py)
    "LayerParameter.tiling_param", "TilingParameter.tile_dim",
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
    # Structured Sparsity Learning's per-param L1/L2 and block group lasso (caffepy/solvers/
    # sparsity.py); its other fields are declared in proto/additions.d/census_ssl_fields.json
    "ParamSpec.regularization_type", "ParamSpec.block_group_lasso", "BlockGroupLassoSpec.xdimen",
    "BlockGroupLassoSpec.ydimen", "BlockGroupLassoSpec.block_decay_mult",
    # 7hil/caffe's Onehot, Phoenix1327/caffe's SemiAccuracy (caffepy/forks/misc/early_2014.py)
    "LayerParameter.onehot_param", "V1LayerParameter.onehot_param", "OnehotParameter.dim",
    "OnehotParameter.invert_coding", "LayerParameter.label_transform_param",
    "V1LayerParameter.label_transform_param", "LabelTransformParameter.label_transform_file",
    # the "file" filler of daerduoCarey/mycaffe (spatial transformers; caffepy/fillers.py)
    "FillerParameter.file",
    # the "imagexy" filler of dementrock/caffe, branch pose (caffepy/fillers.py)
    "FillerParameter.width", "FillerParameter.height",
    # its master's "expectation" and "expectation_data" fillers (caffepy/fillers.py)
    "FillerParameter.expectation_option",
    # happynear/caffe-windows' msra filler for PReLU nets (caffepy/fillers.py)
    "FillerParameter.alpha",
    # Dynamic Network Surgery's CConvolution / CInnerProduct (caffepy/forks/misc/dns.py)
    "LayerParameter.cconvolution_param", "LayerParameter.cinner_product_param",
    "CConvolutionParameter.gamma", "CConvolutionParameter.power", "CConvolutionParameter.c_rate",
    "CConvolutionParameter.iter_stop", "CConvolutionParameter.weight_mask_filler",
    "CConvolutionParameter.bias_mask_filler", "CInnerProductParameter.gamma",
    "CInnerProductParameter.power", "CInnerProductParameter.c_rate",
    "CInnerProductParameter.iter_stop", "CInnerProductParameter.weight_mask_filler",
    "CInnerProductParameter.bias_mask_filler",
    # happynear's PredictBox (caffepy/forks/face/predict_box.py); nms and output_vector are read
    # by nothing (predict_box_layer.cpp LayerSetUp takes both modes from the bottom and top counts)
    "LayerParameter.predict_box_param", "PredictBoxParameter.stride",
    "PredictBoxParameter.receptive_field", "PredictBoxParameter.positive_thresh",
    "PredictBoxParameter.bbreg_exp", "PredictBoxParameter.nms", "PredictBoxParameter.output_vector",
    # the gradient-reversal GradientScaler (caffepy/forks/misc/perturb.py)
    "LayerParameter.gradient_scaler_param",
    # Ristretto's quantized layers (caffepy/forks/misc/ristretto.py)
    "QuantizationParameter.mant_bits", "QuantizationParameter.exp_bits",
    "QuantizationParameter.exp_min", "QuantizationParameter.exp_max",
    "QuantizationParameter.precision=MINIFLOAT",
    "QuantizationParameter.precision=INTEGER_POWER_OF_2_WEIGHTS",
    "QuantizationParameter.rounding_scheme=STOCHASTIC",
    # AR-Ped's BinaryConvolution / BinaryInnerProduct (caffepy/forks/misc/binary_weights.py)
    "LayerParameter.binary_convolution_param", "LayerParameter.binary_inner_product_param",
    "BinaryConvolutionParameter.use_alpha", "BinaryConvolutionParameter.use_binarization",
    "BinaryInnerProductParameter.use_alpha", "BinaryInnerProductParameter.use_binarization",
    # dongyp13/Stochastic-Quantization's BinaryConvolution / BinaryInnerProduct (same module)
    "ConvolutionParameter.sq", "ConvolutionParameter.ratio", "InnerProductParameter.sq",
    "InnerProductParameter.ratio",
    # happynear's Truncation / SoftTruncation (caffepy/forks/misc/truncation.py)
    "LayerParameter.truncation_param", "TruncationParameter.lower_bound",
    "TruncationParameter.upper_bound", "LayerParameter.soft_truncation_param",
    "SoftTruncationParameter.c",
    # BeSlower/caffe's LiftedStructSimilaritySoftmaxLoss (caffepy/forks/misc/lifted_struct.py)
    "LayerParameter.lifted_struct_sim_softmax_loss_param",
    "LiftedStructSimilaritySoftmaxLossParameter.margin",
    # daerduoCarey/SpatialTransformerLayer's SpatialTransformer (caffepy/forks/misc/st_carey.py)
    "SpatialTransformerParameter.to_compute_dU", "SpatialTransformerParameter.theta_1_1",
    "SpatialTransformerParameter.theta_1_2", "SpatialTransformerParameter.theta_1_3",
    "SpatialTransformerParameter.theta_2_1", "SpatialTransformerParameter.theta_2_2",
    "SpatialTransformerParameter.theta_2_3",
    # the YOLOv5 ports' Upsample to a size (caffepy/forks/misc/upsample_size.py)
    "UpsampleParameter.height", "UpsampleParameter.width",
    # Tongcheng/caffe's DenseBlock (senlinuc/caffe_ocr, leonzfa/iResNet;
    # caffepy/forks/misc/dense_block.py)
    "LayerParameter.denseblock_param", "DenseBlockParameter.numTransition",
    "DenseBlockParameter.initChannel", "DenseBlockParameter.growthRate",
    "DenseBlockParameter.pad_h",
    "DenseBlockParameter.pad_w", "DenseBlockParameter.conv_verticalStride",
    "DenseBlockParameter.conv_horizentalStride", "DenseBlockParameter.filter_H",
    "DenseBlockParameter.filter_W", "DenseBlockParameter.Filter_Filler",
    "DenseBlockParameter.BN_Scaler_Filler", "DenseBlockParameter.BN_Bias_Filler",
    "DenseBlockParameter.gpuIdx", "DenseBlockParameter.use_dropout",
    "DenseBlockParameter.dropout_amount", "DenseBlockParameter.use_BC",
    "DenseBlockParameter.BC_ultra_space_efficient", "DenseBlockParameter.workspace_MB",
    "DenseBlockParameter.moving_average_fraction",
    # ApolloCaffe's / CharlesShang/caffe's LstmUnit (caffepy/forks/misc/lstm_unit.py)
    "LayerParameter.lstm_unit_param", "LstmUnitParameter.num_cells",
    "LstmUnitParameter.input_weight_filler", "LstmUnitParameter.input_gate_weight_filler",
    "LstmUnitParameter.forget_gate_weight_filler", "LstmUnitParameter.output_gate_weight_filler",
    "LstmUnitParameter.tie_output_forget", "LstmUnitParameter.tanh_hidden",
    "LstmUnitParameter.weight_filler",
    # py-faster-rcnn-st's PowerFile, LocLoss, STLoss (caffepy/forks/misc/st_losses.py)
    "LayerParameter.power_file_param", "PowerFileParameter.shift_file",
    "LayerParameter.loc_loss_param", "LocLossParameter.threshold",
    "LayerParameter.st_loss_param", "STLossParameter.output_H", "STLossParameter.output_W",
    # happynear/caffe-windows' SubRegion and Pairwise (caffepy/forks/misc/happynear_ops.py)
    "LayerParameter.sub_region_param", "V1LayerParameter.sub_region_param",
    "SubRegionParameter.region_height", "SubRegionParameter.region_width",
    "SubRegionParameter.data_height", "SubRegionParameter.data_width", "SubRegionParameter.as_dim",
    "LayerParameter.pairwise_param", "PairwiseParameter.operation", "PairwiseParameter.coeff",
    # happynear/caffe-windows' SoftContrastiveLoss and NCALoss (caffepy/forks/misc/
    # happynear_losses.py); exponent_scale is accepted: the fork's layer never reads it
    # (soft_contrastive_loss_layer.cpp sets exponent_scale_ from negative_weight)
    "LayerParameter.soft_contrastive_loss_param", "SoftContrastiveParameter.positive_margin",
    "SoftContrastiveParameter.negative_margin", "SoftContrastiveParameter.positive_weight",
    "SoftContrastiveParameter.negative_weight", "SoftContrastiveParameter.exponent_scale",
    "SoftContrastiveParameter.square", "LayerParameter.nca_param",
    "NCAParameter.min_negative_only",
    # its GeneralTripletLoss, BatchContrastiveLoss, ConfidencePenaltyLoss (the same module) and
    # Hotspot (caffepy/forks/misc/happynear_ops.py)
    "LayerParameter.general_triplet_loss_param", "GeneralTripletParameter.margin",
    "GeneralTripletParameter.add_center_loss", "GeneralTripletParameter.hardest_only",
    "GeneralTripletParameter.positive_first", "GeneralTripletParameter.positive_upper_bound",
    "GeneralTripletParameter.positive_weight", "GeneralTripletParameter.negative_weight",
    "LayerParameter.batch_contrastive_loss_param", "BatchContrastiveParameter.positive_margin",
    "BatchContrastiveParameter.negative_margin", "BatchContrastiveParameter.positive_weight",
    "BatchContrastiveParameter.negative_weight", "BatchContrastiveParameter.max_only",
    "LayerParameter.confidence_penalty_loss_param", "ConfidencePenaltyLossParameter.beta",
    "LayerParameter.hotspot_param", "HotspotParameter.gaussian_std",
    "HotspotParameter.output_height", "HotspotParameter.output_width",
    "HotspotParameter.data_height", "HotspotParameter.data_width", "HotspotParameter.mean_removed",
    # DAN's MMDLoss (caffepy/forks/misc/mmd.py)
    "LayerParameter.mmd_param", "MMDParameter.kernel_num", "MMDParameter.kernel_mul",
    "MMDParameter.fix_gamma",
    # Histogram Loss's CosineSimilarityBatch (caffepy/forks/misc/cosine_batch.py)
    "LayerParameter.cosine_similarity_batch_param", "CosineSimilarityBatchParameter.pos_label",
    "CosineSimilarityBatchParameter.neg_label",
    # DeViSE's MultiAccuracy (caffepy/forks/misc/multi_accuracy.py); its axis is accepted: the
    # fork's layer reads accuracy_param.axis instead (multi_accuracy_layer.cpp, Reshape)
    "LayerParameter.multi_accuracy_param", "MultiAccuracyParameter.top_k",
    "MultiAccuracyParameter.version", "MultiAccuracyParameter.filename",
    "MultiAccuracyParameter.axis",
    # 1095560081/caffe's L2Normalization (caffepy/forks/misc/activations.py)
    "LayerParameter.l2n_param", "L2NormalizationParameter.is_global",
    "L2NormalizationParameter.axis", "L2NormalizationParameter.eps",
    # synopsys-caffe's OneHot and MatMul, caffe-simnets' OneHot and SumLoss
    # (caffepy/forks/misc/tensor_ops.py)
    "LayerParameter.one_hot_param", "OneHotParameter.depth", "OneHotParameter.on_value",
    "OneHotParameter.off_value", "OneHotParameter.axis", "OneHotParameter.input_dim",
    "OneHotParameter.to_log", "LayerParameter.matmul_param", "MatMulParameter.transpose_a",
    "MatMulParameter.transpose_b", "MatMulParameter.blob_shape", "LayerParameter.sum_loss_param",
    "SumLossParameter.use_labeled_data",
    # DeViSE's LinearTransform and PoseAccuracy (caffepy/forks/misc/devise.py)
    "LayerParameter.linear_transform_param", "LinearTransformParameter.num_output",
    "LinearTransformParameter.weight_filler", "LinearTransformParameter.axis",
    "LinearTransformParameter.backprop", "LinearTransformParameter.verbose",
    "LayerParameter.pose_accuracy_param", "PoseAccuracyParameter.top_k",
    "PoseAccuracyParameter.axis", "PoseAccuracyParameter.mode", "PoseAccuracyParameter.version",
    # apollocaffe's Wordvec, CapSequence and Py (caffepy/forks/misc/apollocaffe.py)
    "LayerParameter.wordvec_param", "WordvecParameter.dimension", "WordvecParameter.vocab_size",
    "WordvecParameter.weight_filler", "LayerParameter.rp", "RuntimeParameter.cap_sequence_param",
    "CapSequenceParameter.sequence_lengths", "LayerParameter.py_param",
    "PyParameter.param_shapes", "PyParameter.param_fillers", "ParamShapeParameter.dimension",
    # happynear's MultiLabelImageData (caffepy/forks/face/multi_label_image.py); balance_class /
    # balance_by change no batch there (multi_label_image_data_layer.cpp builds per-class lists
    # that load_batch never reads)
    "ImageDataParameter.label_cut_start", "ImageDataParameter.label_cut_end",
    "ImageDataParameter.balance_class", "ImageDataParameter.balance_by",
    # segaware's ChannelReduce and MONet's MyTile (caffepy/forks/misc/channel_ops.py)
    "LayerParameter.channel_reduce_param", "ChannelReduceParameter.num_channels",
    "ChannelReduceParameter.operation", "LayerParameter.my_tile_param", "MyTileParameter.axis",
    "MyTileParameter.tiles",
    # Akrit2013/caffe-dev-160608's L2Norm (caffepy/forks/misc/l2_norm.py)
    "LayerParameter.l2norm_param", "L2NormParameter.l2_length",
    # guomugong/FFIA's SigmoidWeightedCrossEntropyLoss (caffepy/forks/misc/sigmoid_weighted.py)
    "LayerParameter.sigmoid_wce_loss_param", "SigmoidWeightedCELossParameter.alpha",
    # BOBrown/JADF-caffe's RandomMaclaurin (caffepy/forks/misc/jadf.py); random_every_epoch and
    # fixed_matrix are not read by the fork's layer
    "LayerParameter.random_maclaurin_param",
    # the compact-bilinear forks' CompactBilinear (caffepy/forks/misc/bilinear_pooling.py)
    "LayerParameter.compact_bilinear_param", "CompactBilinearParameter.num_output",
    "CompactBilinearParameter.sum_pool",
    # the DeViSE forks' MultiProto (caffepy/forks/misc/multi_proto.py); multi_proto_layer.cpp
    # does not read save
    "LayerParameter.multi_proto_param", "MultiProtoParameter.num_protos",
    "MultiProtoParameter.num_output", "MultiProtoParameter.weight_filler",
    "MultiProtoParameter.save", "MultiProtoParameter.source",
    # the DeViSE forks' PoseData (caffepy/forks/misc/pose_data.py); pose_data_layer.cpp does not
    # read scale, mean_file, crop_size or mirror
    "LayerParameter.pose_data_param",
    # ChenglongChen/caffe-windows' BN with history averages (caffepy/forks/misc/ewma_bn.py);
    # axis only as 1
    "BNParameter.var_eps", "BNParameter.moving_average", "BNParameter.decay", "BNParameter.axis",
    # the per-axis dilation of yjxiong/caffe@9831a2b and others (caffepy/layers/conv_base.py)
    "ConvolutionParameter.dilation_h", "ConvolutionParameter.dilation_w",
    # the Normalize forks' fix_scale (AIROBOTAI/caffe-test, DSCLRCN, UberNet; caffepy/layers/
    # normalization.py): the layer's param_propagate_down, which a net sets from lr_mult
    "NormalizeParameter.fix_scale",
    # happynear/caffe-windows' Deconvolution output offset (caffepy/layers/deconv.py)
    "ConvolutionParameter.shape_offset",
] + ["PoseDataParameter." + f for f in (
    "source", "scale", "mean_file", "batch_size", "crop_size", "mirror", "rand_skip", "shuffle",
    "new_height", "new_width", "is_color", "root_folder")
] + ["RandomMaclaurionParameter." + f for f in (   # BOBrown/JADF-caffe's RandomMaclaurin
    "num_output", "random_every_epoch", "fixed_matrix", "epoch_size", "std1", "std2",
    "distribution_type", "a1", "b1", "a2", "b2")]
    # the forks' engine values that run the same function another way (FFT convolution, the
    # OpenCL branch's INTEL_SPATIAL and LIBDNN kernels, Cambricon's MLU, cuDNN BatchNorm): the
    # layer computes what it computes under CAFFE; not XNOR_NN, whose convolution is binarized
    + ["%sParameter.engine=%s" % pair for pair in (
        ("BN", "MLU"), ("BatchNorm", "CUDNN"), ("BatchNorm", "MLU"), ("Concat", "MLU"),
        ("Convolution", "FFT"), ("Convolution", "INTEL_SPATIAL"), ("Convolution", "LIBDNN"),
        ("Convolution", "MLU"), ("Dropout", "MLU"), ("Eltwise", "MLU"), ("InnerProduct", "MLU"),
        ("LRN", "MLU"), ("Pooling", "LIBDNN"), ("Pooling", "MLU"), ("ReLU", "MLU"),
        ("SPP", "MLU"), ("Softmax", "MLU"))])
