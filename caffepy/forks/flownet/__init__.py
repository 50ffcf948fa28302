"""FlowNet / FlowNet 2 (lmb-freiburg/flownet2).

Modules: ``flow`` (Correlation, ChannelNorm, FlowWarp, Resample, Downsample), ``extra``
(Correlation1D, Accum, NegReLU, Mean, LpqLoss), ``loss`` (L1Loss), ``augment``
(DataAugmentation, GenerateAugmentationParameters, FlowAugmentation, BlackAugmentation; the math in
``augment_math``), ``data`` (CustomData), ``files`` (FLOWriter, FloatWriter, FloatReader,
ImgReader), ``image_writers`` (ImgWriter: PGM / PPM; PFMWriter), ``disparity_data``
(DisparityData: PFM maps from a list file), ``flo_data`` (aharley/segaware's FloData: ``.flo``
fields from a list file),
``liteflownet`` (twhui/LiteFlowNet's Warp: bilinear sampling at absolute coordinates,
not FlowWarp; its Grid: the pixel coordinates added to a flow before Warp; its NegSquare:
y = -x^2), ``flow_prediction_2014`` (Arroosh/optical_flow_prediction's MultiSoftmax,
MultiSoftmaxWithLoss and Resize; flow as classification), ``iresnet`` (leonzfa/iResNet's stereo
training layers RandomCrop and DataSwitch).
Schema: proto/additions.d/segnet_c3d_face_flownet.json, flownet_augment.json,
stereo_random_crop.json.
"""
