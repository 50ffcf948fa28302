"""Pose estimation: the layers of CMU's OpenPose / realtime-pose Caffe forks.

Modules: ``imresize`` (CMU-Perceptual-Computing-Lab/caffe_rtpose's ImResize: multi-scale bicubic
resize and fusion of heat maps), ``switch`` (caffe_rtpose's Switch: one bottom, the last by
default, passed through;
its Maximum: each channel's peak), ``rmpe`` (RMPE's heat-map Caffe: EuclideanLossHeatmap and the
DataHeatmap reader), ``viewpoints`` (shubhtuls/ViewpointsAndKeypoints' EuclideanWeightedLoss and
MaskOutputs), ``car_keypoint`` (hhy5277/car_keypoint_caffe's HeatmapData reader, KeypointL2Loss
and KeypointAcc). OpenPose's training readers (``CPMData``, ``OPData``) are data
layers: ``caffepy.zoo`` replaces them by inputs. Schema: harvested (``imresize_param``); proto/additions.d/census_tail_data.json
(HeatmapDataParameter of both heat-map readers, KeypointAccParameter).
"""
