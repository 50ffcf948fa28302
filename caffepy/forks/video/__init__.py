"""Video: C3D (facebook/C3D) and temporal segment networks (yjxiong/caffe).

Modules: ``video3d`` (Convolution3D, Pooling3D, Deconvolution3D, VoxelWiseSoftmax(WithLoss)),
``data`` (VideoData of C3D and TSN), ``tsn`` (Gather).
Schema: proto/additions.json (C3D), proto/additions.d/segnet_c3d_face_flownet.json,
crfasrnn_tsn_pose.json (TSN's SegData).
"""
