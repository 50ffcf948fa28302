"""py-faster-rcnn's default configuration (``lib/fast_rcnn/config.py``): what its RPN layers and
its data layer (``RoIDataLayer``) read.

``cfg.TRAIN`` / ``cfg.TEST`` (also ``cfg["TRAIN"]``) hold:

========================================  ==========================  =======
key                                       TRAIN                       TEST
========================================  ==========================  =======
RPN_PRE_NMS_TOP_N                         12000                       6000
RPN_POST_NMS_TOP_N                        2000                        300
RPN_NMS_THRESH                            0.7                         0.7
RPN_MIN_SIZE (at original image scale)    16                          16
RPN_POSITIVE_OVERLAP / NEGATIVE_OVERLAP   0.7 / 0.3
RPN_CLOBBER_POSITIVES                     False
RPN_FG_FRACTION / RPN_BATCHSIZE           0.5 / 256
RPN_BBOX_INSIDE_WEIGHTS                   (1, 1, 1, 1)
RPN_POSITIVE_WEIGHT                       -1 (uniform weighting)
BATCH_SIZE / FG_FRACTION                  128 / 0.25
FG_THRESH / BG_THRESH_HI / BG_THRESH_LO   0.5 / 0.5 / 0.1
BBOX_INSIDE_WEIGHTS                       (1, 1, 1, 1)
BBOX_NORMALIZE_TARGETS_PRECOMPUTED        False
BBOX_NORMALIZE_MEANS / STDS               (0, 0, 0, 0) / (0.1, 0.1, 0.2, 0.2)
AGONISTIC (py-R-FCN: class-agnostic)      False
SCALES (shorter side) / MAX_SIZE          (600,) / 1000
IMS_PER_BATCH                             2
HAS_RPN (data layer tops: RPN layout)     False
BBOX_REG (data layer: bbox_* tops)        True
ASPECT_GROUPING / USE_PREFETCH            True / False
========================================  ==========================  =======

and, outside the sections, ``cfg.PIXEL_MEANS`` (BGR ``[[[102.9801, 115.9465, 122.7717]]]``) and
``cfg.RNG_SEED`` (3: the seed of ``USE_PREFETCH``'s thread).

These are the library defaults; py-faster-rcnn's experiment files (``experiments/cfgs/*.yml``)
override some of them (the end-to-end recipe ``faster_rcnn_end2end.yml`` sets ``HAS_RPN: True``,
``IMS_PER_BATCH: 1``, ``BG_THRESH_LO: 0.0`` and ``BBOX_NORMALIZE_TARGETS_PRECOMPUTED: True``).
Change a value in place (``cfg.TRAIN.RPN_POST_NMS_TOP_N = 1000``) before building the net.
"""
import numpy as np


class Section(dict):
    """A dict whose keys are also attributes (py-faster-rcnn uses EasyDict)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError("config has no key '%s'" % key)

    def __setattr__(self, key, value):
        self[key] = value


def default_config():
    """A fresh copy of the default configuration."""
    rpn_common = dict(RPN_NMS_THRESH=0.7, RPN_MIN_SIZE=16)
    train = Section(
        rpn_common, RPN_PRE_NMS_TOP_N=12000, RPN_POST_NMS_TOP_N=2000,
        RPN_POSITIVE_OVERLAP=0.7, RPN_NEGATIVE_OVERLAP=0.3, RPN_CLOBBER_POSITIVES=False,
        RPN_FG_FRACTION=0.5, RPN_BATCHSIZE=256, RPN_BBOX_INSIDE_WEIGHTS=(1.0, 1.0, 1.0, 1.0),
        RPN_POSITIVE_WEIGHT=-1.0,
        BATCH_SIZE=128, FG_FRACTION=0.25, FG_THRESH=0.5, BG_THRESH_HI=0.5, BG_THRESH_LO=0.1,
        BBOX_INSIDE_WEIGHTS=(1.0, 1.0, 1.0, 1.0), BBOX_NORMALIZE_TARGETS_PRECOMPUTED=False,
        AGONISTIC=False,
        BBOX_NORMALIZE_MEANS=(0.0, 0.0, 0.0, 0.0), BBOX_NORMALIZE_STDS=(0.1, 0.1, 0.2, 0.2),
        SCALES=(600,), MAX_SIZE=1000, IMS_PER_BATCH=2, HAS_RPN=False, BBOX_REG=True,
        ASPECT_GROUPING=True, USE_PREFETCH=False)
    test = Section(rpn_common, RPN_PRE_NMS_TOP_N=6000, RPN_POST_NMS_TOP_N=300)
    return Section(TRAIN=train, TEST=test, RNG_SEED=3,
                   PIXEL_MEANS=np.array([[[102.9801, 115.9465, 122.7717]]]))


cfg = default_config()
