"""YOLO on Caffe (eric612/MobileNet-YOLO, yeahkun/caffe-yolo and relatives).

Modules: ``output`` (YoloDetectionOutput, Yolov3DetectionOutput), ``loss`` (RegionLoss, Yolov3),
``iou`` (the IoU family of Yolov3's ``iou_loss``), ``gaussian`` (GaussianYolov3), ``seg`` (YoloSeg,
SegmentationEvaluate, AssistedExcitation), ``v1`` (caffe-yolo's DetectionLoss), ``caffe_yolov2``
(gklz1982/caffe-yolov2's one-bottom DetectionOutput and its RegionLoss form), ``darknet2caffe``
(the Pooling of ChenYingpeng/darknet2caffe's Caffe, one more output when kernel - stride is odd,
for the ``layer<N>-maxpool`` layers that converter writes), ``sparse_net`` (zhangnju/sparse_net's
Region and its RegionLoss form), ``eval_detection`` (EvalDetection of caffe-yolo and of
intel/caffe), ``box_data`` (caffe-yolo's BoxData reader). Reorg and the nearest-neighbour
Upsample are in :mod:`caffepy.forks.misc.vision`.
Schema: proto/additions.json and proto/additions.d/nvcaffe_yolo_ssd.json, yolo_iou.json, census_forks3.json.
"""
