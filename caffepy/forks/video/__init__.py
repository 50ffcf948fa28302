"""Video: C3D (facebook/C3D), temporal segment networks (yjxiong/caffe) and the N-d 3-D forks
(mzolfaghari/ECO-efficient-video-understanding caffe_3d, VisionLearningGroup/R-C3D caffe3d,
chuckcho/video-caffe).

Modules: ``video3d`` (Convolution3D, Pooling3D, Deconvolution3D, VoxelWiseSoftmax(WithLoss)),
``data`` (VideoData of C3D and TSN), ``tsn`` (Gather, Scatter, BatchReduction, SyncBN,
MultilabelLogisticLoss), ``sparse_data`` (yjxiong/caffe's SparseData text reader), ``nd`` (Pooling
over N spatial axes from a list or repeated kernel_size / stride / pad, NdPooling, NdConvolution),
``scnn`` (S-CNN's
SoftmaxWithLoss with an overlap bottom), ``video_triplet`` (caffe-video_triplet's RankHardLoss
and Norm), ``tdd`` (iamyup/caffe_tdd's TransformSoftmaxWithLoss, TransformAccuracy),
``conv_lstm`` (ConvLSTM and ConvLSTMReLU of t2mhanh/caffe_convLSTM_WTA, agethen's ConvLSTM),
``pooling_nd`` (yulequan/3D-Caffe's PoolingND, pooling_nd_param), ``p3d_pooling`` (the
Pseudo-3D ResNets' Pooling3D: kernel_l / stride_l / pad_l; census_forks3.json).
Built-in Python layer: R-C3D's twin proposal layer ``rpn.proposal_layer.ProposalLayer`` (``rc3d``;
chosen by its form, 2 bottoms, beside py-faster-rcnn's layer of that name in
``caffepy.forks.detection``).
Schema: proto/additions.json (C3D), proto/additions.d/segnet_c3d_face_flownet.json,
crfasrnn_tsn_pose.json (TSN's SegData), video_nd_pooling.json (kernel_size_nd, stride_nd,
pad_nd); the harvested lstm_conv_param / lstm_debug_param
(caffepy.proto.harvest_computed.COMPUTED).
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('rpn.proposal_layer', 'ProposalLayer', 'rc3d:TwinProposalLayer'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
