"""Fields caffepy's own schema declares for a fork (``proto/additions.d``) that no caffepy code
computes: set to a value other than their default they are treated as harvested fields
(:mod:`caffepy.proto.harvest_policy`: one error line when strict, a WARNING in ``summary`` /
``draw`` and with ``--ignore-unknown-fields``), so a file never silently loses what they do in
their fork. ``tests/proto/test_harvest_readers.py`` checks that every field of the additions is
read by some module, listed here, or named there as changing no value.
"""

NVCAFFE = "NVIDIA/caffe"

#: {"Message.field": fork}
OWN_NOT_COMPUTED = {
    # NVCaffe's solver: learning-rate ramp-up, momentum and weight-decay policies, LARC, the
    # schedule of its last epochs' tests and snapshots
    **{"SolverParameter." + f: NVCAFFE for f in (
        "rampup_interval", "rampup_lr", "min_lr", "momentum_policy", "max_momentum",
        "momentum_power", "larc", "larc_policy", "larc_eta", "larc_turbo", "weight_decay_policy",
        "weight_decay_power", "max_weight_decay", "test_and_snapshot_last_epochs")},
    # NVCaffe's data augmentation and readers
    **{"TransformationParameter." + f: NVCAFFE for f in (
        "img_rand_resize_lower", "img_rand_resize_upper", "rand_resize_ratio_lower",
        "rand_resize_ratio_upper", "vertical_stretch_lower", "vertical_stretch_upper",
        "horizontal_stretch_lower", "horizontal_stretch_upper", "interpolation_algo_down",
        "interpolation_algo_up", "allow_upscale")},
    "ImageDataParameter.short_side": NVCAFFE,
    "MultiBoxLossParameter.ignore_difficult_gt": NVCAFFE,
    # chenzhenhua986/CAFFE-CapsNet's capsule deconvolution (no caffepy layer)
    "LayerParameter.capsule_deconv_transform_param": "chenzhenhua986/CAFFE-CapsNet",
    "LayerParameter.capsule_deconv_routing_param": "chenzhenhua986/CAFFE-CapsNet",
    # lmb-freiburg/flownet2's data reader: its sampling and order
    **{"DataParameter." + f: "lmb-freiburg/flownet2" for f in (
        "huge_video_dataset", "limit_samples", "permute_every_iter")},
    # DeepLab-Context's unlabelled ImageData
    "ImageDataParameter.has_label": "TheLegendAli/DeepLab-Context",
}


def entries():
    """The policy table's entries for :data:`OWN_NOT_COMPUTED`."""
    return {key: {"forks": [fork], "count": 1} for key, fork in OWN_NOT_COMPUTED.items()}
