"""SSD (weiliu89/caffe) and TextBoxes / TextBoxes++ (MhLiao), which extend it.

Modules: ``detection`` (Permute, PriorBox, DetectionOutput), ``multibox`` (MultiBoxLoss),
``evaluate`` (DetectionEvaluate), ``textboxes`` (PriorBox with ``denser_prior_boxes``),
``textboxes_polygon`` (DetectionOutput with ``use_polygon``), ``refinedet`` (RefineDet's
MultiBoxLoss and DetectionOutput with the ARM bottoms).
Schema: proto/additions.json (SSD's messages) and proto/additions.d/surveyed_forks.json.
"""
