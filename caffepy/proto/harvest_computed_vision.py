"""The harvested fields that caffepy's detection, segmentation, SSD, pose, video and optical-flow
fork layers compute (``"Message.field"`` names; their layers live in ``caffepy/forks/detection``,
``segmentation``, ``ssd``, ``pose``, ``video`` and ``flownet``): never refused, as part of
:data:`caffepy.proto.harvest_computed.COMPUTED`. Each group names the fork and the module that
computes it."""

# "Message.field" names of harvested fields that the detection, segmentation, SSD, pose, video and
# optical-flow fork layers compute.
VISION_COMPUTED = frozenset([
    # the OpenCL branch's MergeCrop and N-d MemoryData (caffepy/forks/segmentation/mergecrop.py)
    "LayerParameter.mergecrop_param", "MergeCropParameter.operation", "MergeCropParameter.forward",
    "MergeCropParameter.backward", "MemoryDataParameter.dim",
    "LayerParameter.hard_sigmoid_param", "HardSigmoidParameter.alpha", "HardSigmoidParameter.beta",
    "LayerParameter.scalar_param", "ScalarParameter.axis",
    "LayerParameter.insanity_param", "InsanityParameter.lb", "InsanityParameter.ub",
    "V1LayerParameter.insanity_param",
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
    # Look into Person's ParseEvaluate (caffepy/forks/segmentation/lip.py)
    "LayerParameter.parse_evaluate_param", "ParseEvaluateParameter.num_labels",
    "ParseEvaluateParameter.ignore_label",
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
    # the detection forks' FocalLoss and MultiBoxFocalLoss (chuanqi305's;
    # caffepy/forks/ssd/focal.py)
    "FocalLossParameter.axis", "FocalLossParameter.engine",
    # RRD's Extend and ORPooling (MhLiao/RRD; caffepy/forks/ssd/rrd.py)
    "LayerParameter.orn_param", "ORNParameter.orientations",
    # LiteFlowNet's NegSquare (twhui/LiteFlowNet; caffepy/forks/flownet/liteflownet.py): no fields
    "LayerParameter.negsquare_param",
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
    # its Unpooling's engine (and that of the forks carrying the layer): the layer factory of
    # HyeonwooNoh/caffe@d9e8494 builds the one CAFFE layer for DEFAULT and CAFFE;
    # ArcherFMY/caffe-sal-ensemble@ff8e040, which adds CUDNN, never reads the field
    "UnpoolingParameter.engine",
    # Viewpoints and Keypoints' 2014 layers (caffepy/forks/pose/viewpoints.py)
    "LayerParameter.euclidean_weight_param", "V1LayerParameter.euclidean_weight_param",
    "EuclideanWeightedLossParameter.lambda", "LayerParameter.mask_outputs_param",
    "V1LayerParameter.mask_outputs_param", "MaskOutputsParameter.kernel_size",
    # Arroosh/optical_flow_prediction's MultiSoftmax(WithLoss) (forks/flownet/flow_prediction_2014)
    "LayerParameter.mult_softmax_param", "V1LayerParameter.mult_softmax_param",
    "MultiSoftmaxParameter.max_multiple", "LayerParameter.mult_softmax_loss_param",
    "V1LayerParameter.mult_softmax_loss_param", "MultiSoftmaxLossParameter.learning_multiple",
    "LayerParameter.resize_param", "V1LayerParameter.resize_param",
    "ResizeParameter.is_pyramid_test",
    "ResizeParameter.out_height_scale", "ResizeParameter.out_width_scale",
    "ResizeParameter.multiple_scale",
    # gklz1982/caffe-yolov2's one-bottom DetectionOutput (caffepy/forks/yolo/caffe_yolov2.py);
    # label_map_file only names the classes of the fork's file output; coords stays refused (the
    # layer reads 4 box coordinates)
    "DetectionOutputParameter.side", "DetectionOutputParameter.num_box",
    "DetectionOutputParameter.nms_threshold", "DetectionOutputParameter.biases",
    "DetectionOutputParameter.label_map_file",
    # the R*CNN MIL of liyantett/Joint-Local-and-Global-...'s caffe-fast-rcnn
    # (caffepy/forks/detection/rstar_cnn.py)
    "LayerParameter.mil_param",
    # the C++ RPN proposal layer of PureCPP_FRCNN and its copies
    # (caffepy/forks/detection/rpn_cpp.py)
    "LayerParameter.rpn_param", "RPNParameter.feat_stride", "RPNParameter.basesize",
    "RPNParameter.scale", "RPNParameter.ratio", "RPNParameter.boxminsize",
    "RPNParameter.per_nms_topn", "RPNParameter.post_nms_topn", "RPNParameter.nms_thresh",
    # the Pooling3D of ZhaofanQiu/pseudo-3d-residual-networks (caffepy/forks/video/p3d_pooling.py)
    "Pooling3DParameter.kernel_h", "Pooling3DParameter.kernel_w", "Pooling3DParameter.stride_h",
    "Pooling3DParameter.stride_w", "Pooling3DParameter.global_pooling",
    # yulequan/3D-Caffe's PoolingND (caffepy/forks/video/pooling_nd.py)
    "LayerParameter.pooling_nd_param", "PoolingNDParameter.pool", "PoolingNDParameter.pad",
    "PoolingNDParameter.kernel_size", "PoolingNDParameter.stride", "PoolingNDParameter.pad_h",
    "PoolingNDParameter.pad_w", "PoolingNDParameter.kernel_h", "PoolingNDParameter.kernel_w",
    "PoolingNDParameter.stride_h", "PoolingNDParameter.stride_w", "PoolingNDParameter.engine",
    "PoolingNDParameter.global_pooling", "PoolingNDParameter.axis",
    # yjxiong/caffe's BatchReduction (caffepy/forks/video/tsn.py)
    "LayerParameter.batch_reduction_param", "BatchReductionParameter.level",
    "BatchReductionParameter.reduction_param", "BatchReductionParameter.pos",
    "ReductionParameter.k", "ReductionParameter.operation=TOPK",
    # MNC's ROIWarping, MaskResize, ROIMaskPooling (caffepy/forks/detection/mnc.py); the
    # R-FCN / soft-NMS forks' inner_product_blob_param is accepted: their InnerProductBlob
    # (the same module) never reads it (inner_product_blob_layer.cpp reads inner_product_param)
    "LayerParameter.inner_product_blob_param", "InnerProductBlobParameter.transpose",
    "LayerParameter.roi_warping_param", "ROIWarpingParameter.pooled_h",
    "ROIWarpingParameter.pooled_w", "ROIWarpingParameter.spatial_scale",
    "LayerParameter.mask_resize_param", "MaskResizeParameter.output_height",
    "MaskResizeParameter.output_width", "LayerParameter.roi_mask_pooling_param",
    "ROIMaskPoolingParameter.pooled_h", "ROIMaskPoolingParameter.pooled_w",
    "ROIMaskPoolingParameter.spatial_scale", "ROIMaskPoolingParameter.spatial_shift",
    "ROIMaskPoolingParameter.half_part", "ROIMaskPoolingParameter.roi_scale",
    "ROIMaskPoolingParameter.mask_scale",
    # RRPN's and CRPN's RotateROIPooling (caffepy/forks/detection/rotated_roi.py)
    "LayerParameter.rotate_pooling_param", "LayerParameter.rotate_roi_pooling_param",
    "RotateROIPoolingParameter.pooled_h", "RotateROIPoolingParameter.pooled_w",
    "RotateROIPoolingParameter.spatial_scale",
    # PSROIAlign and DeformablePSROIPooling (caffepy/forks/detection/rfcn_align.py); pooled_size
    # is never read (makefile/frcnn src/caffe/DeformConv/deformable_psroi_pooling_layer.cpp
    # LayerSetUp sets the pooled size to group_size)
    "LayerParameter.psroi_align_param", "PSROIAlignParameter.spatial_scale",
    "PSROIAlignParameter.output_dim", "PSROIAlignParameter.group_size",
    "PSROIAlignParameter.sample_num", "LayerParameter.deformable_psroi_pooling_param",
    "DeformablePSROIPoolingParameter.spatial_scale", "DeformablePSROIPoolingParameter.output_dim",
    "DeformablePSROIPoolingParameter.group_size", "DeformablePSROIPoolingParameter.pooled_size",
    "DeformablePSROIPoolingParameter.part_size", "DeformablePSROIPoolingParameter.sample_per_part",
    "DeformablePSROIPoolingParameter.trans_std", "DeformablePSROIPoolingParameter.no_trans",
    # CRPN's and RRPN's RotateROIAlign (caffepy/forks/detection/rotated_align.py); RRPN's kernel
    # takes its scales from im_info and the map (its spatial_scale changes nothing computed)
    "LayerParameter.rotate_align_param", "LayerParameter.rotate_roi_align_param",
    "RotateROIAlignParameter.pooled_h", "RotateROIAlignParameter.pooled_w",
    "RotateROIAlignParameter.spatial_scale",
    # nnop/caffe's ROIAlign (caffepy/forks/detection/nnop_roi_align.py), the variant taken when
    # roi_align_param is set; Cambricon's sampling_ratio and engine are not among these
    "LayerParameter.roi_align_param", "ROIAlignParameter.pooled_h", "ROIAlignParameter.pooled_w",
    "ROIAlignParameter.spatial_scale",
    # pathak22/caffe-ccnn's DenseCRF (caffepy/forks/segmentation/densecrf.py)
    "LayerParameter.densecrf_param", "DenseCRFParameter.x_gauss", "DenseCRFParameter.y_gauss",
    "DenseCRFParameter.wt_gauss", "DenseCRFParameter.x_bilateral",
    "DenseCRFParameter.y_bilateral", "DenseCRFParameter.r_bilateral",
    "DenseCRFParameter.g_bilateral", "DenseCRFParameter.b_bilateral",
    "DenseCRFParameter.wt_bilateral",
    # the OpenCL branch's Affinity (caffepy/forks/segmentation/malis.py)
    "LayerParameter.affinity_param", "AffinityParameter.offset",
    # AttentionMask's SlidingWindowIndex (caffepy/forks/segmentation/attention_mask.py)
    "LayerParameter.sliding_window_param", "SlidingWindowParameter.window_h",
    "SlidingWindowParameter.window_w", "SlidingWindowParameter.stride_h",
    "SlidingWindowParameter.stride_w",
    # LiteFlowNet's ExpMax (caffepy/forks/flownet/liteflownet.py)
    "LayerParameter.expmax_param", "ExpMaxParameter.base", "ExpMaxParameter.scale",
    "ExpMaxParameter.shift",
    # caffe-ccnn's Repack and RunningAverage, dbnet-caffe-matlab's RunningAverage
    # (caffepy/forks/segmentation/ccnn.py)
    "LayerParameter.repack_param", "RepackParameter.operation", "RepackParameter.stride",
    "RepackParameter.stride_h", "RepackParameter.stride_w",
    "LayerParameter.running_average_param",
    "RunningAverageParameter.alpha", "RunningAverageParameter.initial_value",
    "RunningAverageParameter.reset_history", "RunningAverageParameter.mass",
    "RunningAverageParameter.update_test",
    # segaware's Im2dist (caffepy/forks/segmentation/segaware.py)
    "LayerParameter.im2dist_param", "Im2distParameter.norm", "Im2distParameter.remove_center",
    "Im2distParameter.remove_bounds",
    # yjxiong/caffe's SparseData (caffepy/forks/video/sparse_data.py)
    "LayerParameter.sparse_data_param", "SparseDataParameter.source_file",
    "SparseDataParameter.mat_height", "SparseDataParameter.mat_width",
    "SparseDataParameter.mat_channels", "SparseDataParameter.encode_type",
    "SparseDataParameter.batch_size", "SparseDataParameter.probability",
    # AttentionMask's SlidingWindow (caffepy/forks/detection/attention_mask.py)
    "LayerParameter.sliding_window_param", "SlidingWindowParameter.window_h",
    "SlidingWindowParameter.window_w", "SlidingWindowParameter.stride_h",
    "SlidingWindowParameter.stride_w",
    # segaware's Im2parity and DistLoss (caffepy/forks/segmentation/segaware_parity.py)
    "LayerParameter.im2parity_param", "Im2parityParameter.ignore_label",
    "LayerParameter.dist_loss_param", "DistLossParameter.alpha", "DistLossParameter.beta",
    "DistLossParameter.ignore_label",
    # yulequan/3D-Caffe's SoftmaxWithWeightedLoss (forks/segmentation/softmax_weighted_3d.py)
    "LossParameter.weight_source",
    # Akrit2013/caffe-dev-160608's SuperpixelPooling (caffepy/forks/segmentation/
    # superpixel_pooling.py)
    "LayerParameter.superpixel_pooling_param", "SuperpixelPoolingParameter.num_output",
    "SuperpixelPoolingParameter.pool",
    # ApolloCaffe's HungarianLoss and NumpyData (caffepy/forks/detection/reinspect.py);
    # hungarian_loss_layer.cpp reads neither width nor height
    "LayerParameter.hungarian_loss_param", "HungarianLossParameter.match_ratio",
    "HungarianLossParameter.permute_matches", "HungarianLossParameter.width",
    "HungarianLossParameter.height", "LayerParameter.rp", "RuntimeParameter.numpy_data_param",
    "NumpyDataParameter.shape", "NumpyDataParameter.data",
    # agethen's ConvLSTM / ConvLSTMReLU as t2mhanh/caffe_convLSTM_WTA carries them
    # (caffepy/forks/video/conv_lstm.py; the fields CopyConv leaves out are ignored there too)
    "LayerParameter.lstm_conv_param", "LayerParameter.lstm_debug_param",
] + ["LSTMConvolutionParameter." + f for f in (
    "num_output", "bias_term", "pad", "kernel_size", "stride", "dilation", "group",
    "weight_filler", "bias_filler", "type", "axis", "engine", "force_nd_im2col", "pad_h", "pad_w",
    "kernel_h", "kernel_w", "stride_h", "stride_w")
] + ["LSTMDebugParameter." + f for f in (
    "expose", "disable_hadamard", "axis_hadamard", "num_axes_hadamard", "ignore_x")] + [
    # makefile/frcnn's DeformableConvolution (caffepy/forks/detection/deform_conv.py); engine and
    # force_nd_im2col are read by its LayerSetUp and do not change what its kernels compute
    "LayerParameter.deformable_convolution_param", "V1LayerParameter.deformable_convolution_param",
] + ["DeformableConvolutionParameter." + f for f in (
    "num_output", "bias_term", "pad", "kernel_size", "group", "stride", "weight_filler",
    "bias_filler", "pad_h", "pad_w", "kernel_h", "kernel_w", "stride_h", "stride_w", "engine",
    "axis", "force_nd_im2col", "dilation", "deformable_group")])
