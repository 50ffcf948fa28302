"""Layers several forks share, and smaller forks.

Modules: ``vision`` (Interp of PSPNet / DeepLab, ctensmeyer/caffe's BilinearInterpolation, YOLO's
nearest Upsample, ShuffleChannel, Axpy,
Reorg, VPGNet's Tiling), ``layers`` (SeLu, SeLuDropout, SegAccuracy), ``ssl`` (wenwei202/caffe's Sparsify,
SymmetricRectify), ``caffepro`` (yihui-he/caffe-pro's Filter with filter_param), ``activations`` (Mish of the
darknet2caffe forks; synopsys-caffe's HardSwish and HardSigmoid; the compact-bilinear forks'
SignedSqrt and L2Normalize; liu-xb/RAM's NormalizationL2; Scalar, the multiply-by-a-second-bottom layer of video_prop_networks /
DSCLRCN / Curve-Text-Detector; ALISCIFP/caffe's MinReLU; L2Normalization of AlfredXiangWu/caffe and
1095560081/caffe), ``tensor_ops`` (synopsys-caffe's broadcasting Maximum, OneHot and MatMul;
caffe-simnets' OneHot and SumLoss; caffe-fr-chairs' SumLoss; video_prop_networks' MatMul),
``devise`` (Qi-Xian/DeVise's LinearTransform, Similarity and PoseAccuracy), ``apollocaffe``
(apollocaffe's Wordvec, CapSequence and its Python-layer holder Py), ``counting`` (shizenglin/Deep-NCL's MAELoss), ``abs_loss`` (the unsupervised-depth fork's AbsLoss), ``escoin`` (chenxuhao/caffe-escoin's EscConvolution), ``spatial_softmax`` (the guided-policy-search forks' SpatialSoftmax), ``ewma_bn`` (ChenglongChen/caffe-windows' BN with history averages, whose bn_param fields RRD, CTPN and others declare), ``tensor_transpose`` (the point-cloud forks' TensorTranspose), ``dropout``
(Cysu/dgd_person_reid's GuidedDropout), ``inplace_reshape`` (the in-place Reshape of older Caffe:
happynear/caffe-windows, ECO's caffe_3d), ``waifu2x`` (lltcggie/caffe's CropCenter), ``glad_crop`` (southatsouth/GLAD's one-bottom Crop), ``rcf``
(yun-liu/rcf's AutoCrop: the crop offset from the net's coordinate maps), ``colorization`` (the
colorization Caffe's ColorConv: BGR / RGB / XYZ / Lab / Gray, as split-brain autoencoders use it).
Layers behind single forks' V1 types (caffepy.proto.v1_fork_types): ``fork_neurons`` (CReLU, Trunc,
Quant_Trun, BlackHole, GetDataDim, GatingInnerProduct), ``fork_losses`` (Regularization, SSIMLoss,
WeightedSoftmaxWithLoss, SigmoidEuclideanLoss, SemiContrastLoss, AccuracyDistance), ``ccn``
(limuhit/CCN's ConstScale, Dtow, MTranspose, MulToBin, BcoderLoss, MLQuant), ``crn``
(hyojinie/crn's Netvlad, Intranorm, Spfilter), ``early_2014`` (2014 forks' InvertGradient,
LabelToOnehot, SoftmaxKLLoss, SoftmaxEntropyLoss, NaN2Zero, MultiLabelLoss,
MultiLabelAccuracy, LabelTransform, Onehot, SemiAccuracy), ``arthurwang``
(ArthurWang123/caffe's SubspacePooling, Im2perPixel, SoftmaxMultilabelLoss,
SoftmaxConditionWithLoss), ``winograd`` (Swas99/caffe's Winograd, its weights in the Winograd
domain, and its Winograd2x2Trans / Winograd2x2Conv convolutions), ``switches`` (the deconvnet
visualisation layers of quanweikikai/deconv-net's nets: PoolingSwitches, SliceHalf, InvPooling), ``weighted_euclidean`` (the per-element WeightedEuclideanLoss of the facial-keypoint nets, pulkitag/caffe's EuclideanLossWithIgnore), ``spatial_transformer`` (e2e_face's SpatialTransformer), ``spatial_wta``
(t2mhanh/caffe_convLSTM_WTA's SpatialWta), ``wino_conv`` (FredJeong/caffe's
WinoConvolution: F(m x m, 3 x 3) tiles chosen by ``wino_tile``), ``random_noise``
(pulkitag/caffe's RandomNoise), ``pulkitag_data`` (pulkitag/caffe's
GenericWindowData and SquareBoxData readers; their shapes for caffepy.zoo in ``zoo_pulkitag``),
``perturb`` (Paethon/caffe's Random gain, the
gradient-reversal GradientScaler, Wheatly2's Mixup), ``stats_losses`` (sanjeev87/CaffeExp's
MineContrastiveLoss, eevignesh/vigneshcaffe's ClassificationStats), ``ip_dropout`` (RuWang15/caffe_pr's
InnerProductDropout), ``bilinear_patch`` (madiken/skaffe_private_old's BilinearPatch), ``xilinx_fixed``
(Xilinx caffe-xilinx's FixedNeuron, ConvolutionFixed, ScaleFixed, NormalizeFixed), ``ristretto``
(pmgysel/caffe's Ristretto: ConvolutionRistretto, DeconvolutionRistretto, FcRistretto,
LRNRistretto), ``binary_weights`` (garrickbrazil/AR-Ped's BinaryConvolution and
BinaryInnerProduct), ``quant_ternary`` (GongCheng1919/Quantitative-and-ternary-caffe-for-
network-compression's ``weights_compress`` / ``activations_compress``: Convolution, Deconvolution,
InnerProduct and Data with ternary / fixed-point / ULQ / clipped weights and tops; schema
proto/additions.d/quantized_ternary.json), ``truncation`` (happynear/caffe-windows' Truncation and SoftTruncation), ``atlas``
(wangshankun/Tengine_Atlas's Atlas: the declared shapes of a network run on a Huawei NPU; no forward), ``dns`` (Dynamic Network Surgery's masked CConvolution and CInnerProduct), ``zoo_readers`` (top shapes of
fork readers caffepy does not build, for caffepy.zoo: aaalgo/caffe's PicPac), ``dense_block``
(Tongcheng/caffe's DenseBlock, a whole DenseNet block in one layer), ``upsample_size`` (the
YOLOv5 ports' Upsample to a size or by factors), ``xnor`` (BWN-XNOR-caffe's BinActiv),
``ternary_weights`` (Stochastic-Quantization's TernaryConvolution and TernaryInnerProduct),
``st_carey`` (daerduoCarey's SpatialTransformer, beside e2e_face's in ``spatial_transformer``).
``lifted_struct`` (BeSlower/caffe's LiftedStructSimilaritySoftmaxLoss), ``lstm_unit``
(ApolloCaffe's and CharlesShang/caffe's LstmUnit: one LSTM step with its own gate weights;
SDS-RCNN's ConvLSTMUnit), ``st_losses`` (py-faster-rcnn-st's PowerFile, LocLoss and STLoss),
``happynear_ops`` (happynear/caffe-windows' Transformer, SubRegion, Pairwise, Gram, Cosine,
Hotspot), ``happynear_losses`` (its SoftContrastiveLoss, NCALoss, GeneralTripletLoss,
BatchContrastiveLoss, ConfidencePenaltyLoss, CorrelationLoss), ``passthrough`` (da-faster-rcnn's
GradientSilent, SDS-RCNN's DummyForward), ``mmd`` (DAN's multi-kernel MMDLoss), ``cosine_batch``
(madkn/HistogramLoss's CosineSimilarityBatch), ``multi_accuracy`` (Qi-Xian/DeVise's
MultiAccuracy), ``hier_classifier`` (hyqneuron/caffe's SoftmaxWithPerClassLoss and
PerClassAccuracy; schema: proto/additions.d/hyqneuron_hier.json), ``ram_losses`` (liu-xb/RAM's
HashingLoss, SetLoss2 and VarLoss), ``saliency_losses`` (nian-liu/DSCLRCN's KLDivLoss and NSSLoss,
commit fbbd35f1, which sunnycia/scripts' saliency nets use).
``channel_ops`` (layers two or more forks share: happynear/caffe-windows' Slope, MONet / DDPN's
MyTile, segaware's ChannelReduce, SROWN / TransferNet's LinearSum, py-faster /
BWN-XNOR-caffe's SplitConcat, MatrixProd). ``jadf`` (BOBrown/JADF-caffe's OuterProduct and
RandomMaclaurin). ``cambricon_unpool`` (Cambricon/caffe's UnPooling: FIXED, DIV, REP; its
unpooling_param fields in proto/additions.d/types_t2b.json). ``dillerch_spp`` (dillerch/caffe's SPP
with ``pyramid_type``: SPP_NET4 / SPP_NET6 / CUSTOM levels pooled with kernel ceil(H / b) and stride
floor(H / b), or with ``pyramid_shape``: max over floor / ceil bins; schema:
proto/additions.d/spp_pyramid_type.json). ``bilinear_pooling`` (Deep-NCL / Label85's Bilinear and
CompactBilinear). ``multi_proto`` and ``pose_data`` (the DeViSE forks' MultiProto and
PoseData; PoseData's top shapes for caffepy.zoo there too). ``broadcast_arith`` (Cambricon/caffe and synopsys-caffe's
broadcasting Add and Sub). ``l2_norm`` (L2Norm: SROWN's per-sample form, Akrit2013/caffe-dev-160608's
per-pixel form with l2norm_param). ``sigmoid_weighted`` (SigmoidWeightedCrossEntropyLoss: FFIA's
class-balanced form, Pedestrian-Attribute-Recognition's three-bottom form).
Fork fields of Caffe's readers and layers: ``fork_data`` (Data / ImageData with bogger/caffe-multigpu's
label_size, PMLS-Caffe's shared_file_system, xavigibert/caffe's source_map and LMDB_FILE,
DeBlurNet's ``label: false``, rapid_categorization's raw_hdf5), ``bogger_multigpu``
(SoftmaxLossWithInvalid), ``xavigibert`` (Convolution / Deconvolution with ParamSpec.lr_pre_mult),
``e2e_face_data`` (e2e_face's HDF5Data transforms and ``value`` filler); schema:
proto/additions.d/census_data_fields.json.
Built-in Python layer: Caffe's example ``pyloss.EuclideanLossLayer`` (``pyloss``).
Schema: proto/additions.json, proto/additions.d/surveyed_forks.json, census_tail_layers.json; the harvested fields of
HardSigmoid, Scalar, CropCenter, ColorConv, MinReLU, Tiling, CConvolution, CInnerProduct,
Ristretto's QuantizationParameter, BinaryConvolution, BinaryInnerProduct, Truncation,
SoftTruncation, LiftedStructSimilaritySoftmaxLoss, LstmUnit, PowerFile, LocLoss, STLoss, SubRegion,
Pairwise, SoftContrastiveLoss, NCALoss, GeneralTripletLoss, BatchContrastiveLoss,
ConfidencePenaltyLoss, Hotspot, MMDLoss, CosineSimilarityBatch, MultiAccuracy, HashingLoss and
SetLoss2 (caffepy.proto.harvest_computed.COMPUTED).
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('pyloss', 'EuclideanLossLayer', 'pyloss:EuclideanLossLayer'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
