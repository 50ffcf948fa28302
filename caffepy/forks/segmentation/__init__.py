"""Semantic segmentation forks: SegNet, DeepLab v1 / v2, ENet, PSANet, DeconvNet, CRF-as-RNN.

Modules: ``segnet`` (BN, the pooling-mask Upsample, DenseImageData, Bayesian test-time Dropout),
``deeplab`` (ImageSegData), ``mat_write`` (DeepLab's MatWrite), ``deeplab_v2`` (DeepLab v2's
SpatialProduct, UniqueLabel, BiasChannel, AdaptiveBiasChannel, MatRead), ``densecrf`` (DeepLab
v2's DenseCRF and caffe-ccnn's, on the permutohedral lattice of ``permutohedral``),
``domain_transform`` (DomainTransform, DomainTransformForwardOnly), ``labelmap_data`` (RCF's
ImageLabelmapData), ``malis`` (the OpenCL branch's Affinity, ConnectedComponent and MalisLoss),
``seg_data`` (TSN's SegData), ``deeplab_v1`` (Padding, SoftmaxWithLoss with softmaxloss_param),
``psanet`` (PointwiseSpatialAttention), ``deconvnet`` (Unpooling, EltwiseAccuracy; the 2014
BinaryAccuracy, RedAccuracy, RedSoftmaxWithLoss, DropoutChannel), ``deconvnet_data``
(WindowSegBinary, SelectSegBinary), ``crfasrnn``
(MultiStageMeanfield), ``whats_the_point`` (the point-supervision softmax losses with
objectness), ``dice`` (jolibrain's DiceCoefLoss), ``lip`` (Look into Person's ParseOutput and
ParseEvaluate; PcaGetCoord), ``picanet`` (nian-liu/PiCANet's saliency layers: AttPooling, its
earlier name PwAttend, ReNetLSTM), ``fh_segments`` (StevenHickson's Segmentation: Felzenszwalb-
Huttenlocher segments as ROI boxes), ``doc_binarization`` (ctensmeyer/caffe's WeightedFmeasureLoss and
PR), ``mergecrop`` (the OpenCL branch's MergeCrop and N-d
MemoryData of 3-D U-Nets), ``attention_mask`` (chwilms/AttentionMask's ArgMaxAll, ConvertIndices,
SplitIndices, CheckAtt, TileProduct, SlidingWindowIndex, TopKOld), ``casenet`` (CASENet's
MultiChannelReweightedSigmoidCrossEntropyLoss on bit-packed edge labels), ``ccnn`` (caffe-ccnn's
Repack and RunningAverage; dbnet-caffe-matlab's RunningAverage as a variant), ``segaware``
(aharley/segaware's Im2dist), ``casenet_bits`` (CASENet / SEAL's bit-coded edge losses:
MultiChannelSigmoidCrossEntropyLoss, ReweightedSigmoidCrossEntropyLoss), ``segaware_parity``
(aharley/segaware's Im2parity and DistLoss), ``softmax_weighted_3d`` (3D-Caffe's
SoftmaxWithWeightedLoss: class weights from a text file), ``superpixel_pooling``
(Akrit2013/caffe-dev-160608's SuperpixelPooling). PSPNet / DeepLab's Interp is in :mod:`caffepy.forks.misc.vision`.
Built-in Python layer: ENet's ``spatial_dropout.SpatialDropoutLayer``.
Schema: proto/additions.json (PSPNet, DeepLab; DeepLab v2's messages too),
proto/additions.d/segnet_c3d_face_flownet.json,
crfasrnn_tsn_pose.json, surveyed_forks.json, census_forks.json (PiCANet's pw_attend_param, StevenHickson's seg_param),
census_tail_data.json (ctensmeyer/caffe's weighted_fmeasure_loss_param, precision_recall_param).
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('spatial_dropout', 'SpatialDropoutLayer', 'spatial_dropout:SpatialDropoutLayer'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
