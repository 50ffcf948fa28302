"""SSD (weiliu89/caffe) and TextBoxes / TextBoxes++ (MhLiao), which extend it.

Modules: ``annotated_data`` (AnnotatedData: an LMDB / LevelDB of AnnotatedDatum with SSD's batch
samplers, distortion, expansion and resize, whose numpy code is ``augment`` and, for the boxes
and batch samplers, ``boxes``), ``annoset`` (SSD's
convert_annoset: ``python3 -m caffepy.forks.ssd.annoset``), ``detection``
(Permute, PriorBox, DetectionOutput), ``multibox`` (MultiBoxLoss), ``focal`` (the detection
forks' FocalLoss and MultiBoxFocalLoss),
``evaluate`` (DetectionEvaluate), ``textboxes`` (PriorBox with ``denser_prior_boxes``),
``textboxes_polygon`` (DetectionOutput with ``use_polygon``), ``refinedet`` (RefineDet's
MultiBoxLoss and DetectionOutput with the ARM bottoms), ``rrd`` (MhLiao/RRD's Extend: channels
repeated per orientation; its ORPooling: the max over each orientation group), ``clustered``
(OpenVINO's PriorBoxClustered: prior boxes of given pixel widths and heights).
Schema: proto/additions.json (SSD's messages), proto/additions.d/surveyed_forks.json and
census_forks.json (PriorBoxParameter width / height); RRD's
``orn_param`` is harvested.
"""
