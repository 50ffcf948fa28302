"""Face-recognition losses: caffe-face (CenterLoss), SphereFace, L-Softmax, AM-Softmax / NormFace
(happynear/caffe-windows), ArcFace (xialuxi/arcface-caffe).

Modules: ``losses`` (CenterLoss, MarginInnerProduct, LargeMarginInnerProduct), ``amsoftmax``
(LabelSpecificAdd, normalized InnerProduct, Normalize, Flip, ChannelScale, CosinAddm, ...),
``margin`` (LabelSpecificMargin / Affine / Rescale / HardMargin, Arccos, Noise), ``arcface``
(CombinedMargin, AdaCosAddmScale, NormL2), ``focal`` (FocalLoss, Accuracy min_is_better), ``lse``
(GlobalLSEMargin, Scale min_value), ``inner_distance`` (InnerDistance), ``happynear``
(happynear/caffe-windows' Insanity, the randomized leaky ReLU, GeneralContrastiveLoss,
TripletLoss, EltwiseAffine and the locally connected Local), ``label85`` (TriVerLoss, TxtFeatData, FaceImage),
``ip_bottom`` (happynear's InnerProduct with its weights from a second bottom), ``fcn_accuracy``
(happynear's FCNAccuracy: the hit rate of score-map peaks), ``predict_box`` (happynear's MTCNN
PredictBox),
``verification_2014`` (AlfredXiangWu/caffe's Distance, VerificationLoss, GaussianNoise,
VerificationAccuracy, TripletAccuracy, BinaryLabel), ``pgcnn`` (mysee1989/PG-CNN's MultiROIPooling:
fixed-size crops around facial landmarks, one top per landmark), ``e2e_face`` (mikuhatsune/e2e_face's
MarginSoftmaxLoss, A-Softmax with its own weights and an annealed lambda), ``center_cos``
(banxia1994/Mycaffe's CenterCosLoss), ``landmark_regression``
(goodluckcwl/custom-caffe's ImageFloatData reader with transform_param.pad_ratio, and
WeightEuclideanLoss), ``multi_label_image`` (happynear/caffe-windows' MultiLabelImageData
reader). ``moving_normalize`` (happynear/caffe-windows' MovingNormalize: division
by a running average of the feature norm). ``label_statistics`` (LabelSpecificStatistics of the
caffe-windows descendants: angle statistics of the label's and the other columns).
``context_structure`` (JiajianZeng/ContextWithStructure's AveragePoint, FacialLandmarkPerformance,
StructualLoss and PerceptualLoss) and ``patch_semantic`` (its PatchSemantic: feature-map
derivatives around each landmark). ``arl`` (ZhiwenShao/ARL, commit 512c2260: Division and
Combination, which cut a map into patches and paste them back, CosineSimilarityLoss,
EuclideanLoss6 and the per-element weights of its three-bottom SigmoidCrossEntropyLoss) and
``arl_meanfield`` (its MultiStageMeanfieldAU3: crfasrnn's mean field guided by a feature map).
Schema: proto/additions.json (caffe-face, SphereFace), proto/additions.d/segnet_c3d_face_flownet.json,
face_ocr.json, crfasrnn_tsn_pose.json, census_forks.json (PG-CNN's multi_roi_pooling_param),
census_data_fields.json (e2e_face's margin_softmax_loss_param), census_tail_data.json (custom-caffe),
census_tail_layers.json (center_cos_loss_param), landmark_lgm_margin.json (ContextWithStructure),
arl_au_attention.json (ARL).
"""
