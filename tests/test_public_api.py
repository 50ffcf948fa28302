"""Every public name the README, docs and pycaffe scripts use imports from where they say, and
the old module paths (``caffepy.contrib.*``, ``caffepy.layers.fork_*``, ``caffepy.optimize`` ...)
give the same module objects as the current ones."""
import importlib

import pytest

CAFFEPY_NAMES = """Net TRAIN TEST Blob Layer NetSpec layers params to_proto set_mode_cpu set_mode_gpu
    set_device set_random_seed layer_type_list get_solver get_solver_from_file get_solver_from_string
    Solver SGDSolver NesterovSolver AdaGradSolver RMSPropSolver AdaDeltaSolver AdamSolver io draw proto
    Classifier Detector coord_map classifier detector net_spec pycaffe Timer init_log solver_count
    set_solver_count solver_rank set_solver_rank set_multiprocess has_nccl NCCL""".split()

CAFFE_MODULES = ["caffe", "caffe.io", "caffe.draw", "caffe.net_spec", "caffe.coord_map",
                 "caffe.classifier", "caffe.detector", "caffe.pycaffe", "caffe.proto.caffe_pb2"]

MODULE_NAMES = {
    "caffepy.layers.base": ["Layer", "register_layer", "register_variant", "shapes_only",
                            "get_layer_class", "layer_type_list", "load_all"],
    "caffepy.layers.python_layer": ["Layer", "register_stand_in", "builtin_layer_class"],
    "caffepy.net": ["Net"],
    "caffepy.netspec": ["NetSpec", "layers", "params", "to_proto"],
    "caffepy.zoo": ["replace_data_layers", "is_data_layer", "input_values", "randomize_params"],
    "caffepy.zoo.summary": ["summarize", "format_summary"],
    "caffepy.infer": ["optimize", "Plan"],
    "caffepy.dist": ["train", "train_distributed", "latest_complete"],
    "caffepy.blob": ["Blob", "ShapeBlob", "SyncedBlob", "blobproto_shape"],
    "caffepy.io": ["load_image", "Transformer"],
    "caffepy.pycaffe": ["Timer", "NCCL"],
    "caffepy.pycaffe.classifier": ["Classifier"],
    "caffepy.pycaffe.detector": ["Detector"],
    "caffepy.forks.detection.frcnn.config": ["cfg"],
    "caffepy.testing": ["check_layer_gradient", "make_layer", "make_blobs", "run_layer"],
}

OLD_PATHS = {
    "caffepy.contrib": "caffepy.forks",
    "caffepy.contrib.frcnn": "caffepy.forks.detection.frcnn",
    "caffepy.contrib.frcnn.proposal": "caffepy.forks.detection.frcnn.proposal",
    "caffepy.contrib.frcnn.anchor_target": "caffepy.forks.detection.frcnn.anchor_target",
    "caffepy.contrib.frcnn.proposal_target": "caffepy.forks.detection.frcnn.proposal_target",
    "caffepy.contrib.frcnn.roi_data": "caffepy.forks.detection.frcnn.roi_data",
    "caffepy.contrib.frcnn.config": "caffepy.forks.detection.frcnn.config",
    "caffepy.contrib.pyloss": "caffepy.forks.misc.pyloss",
    "caffepy.contrib.spatial_dropout": "caffepy.forks.segmentation.spatial_dropout",
    "caffepy.contrib.ctpn": "caffepy.forks.ocr.ctpn",
    "caffepy.contrib.detectnet": "caffepy.forks.nvcaffe.detectnet",
    "caffepy.layers.fork_yolo": "caffepy.forks.yolo.output",
    "caffepy.layers.fork_detection": "caffepy.forks.ssd.detection",
    "caffepy.layers.fork_vision": "caffepy.forks.misc.vision",
    "caffepy.optimize": "caffepy.infer.plan",
    "caffepy.summary": "caffepy.zoo.summary",
    "caffepy.classifier": "caffepy.pycaffe.classifier",
    "caffepy.net_passes": "caffepy.net.passes",
    "caffepy.blas": "caffepy.math.blas",
}


@pytest.mark.parametrize("name", CAFFEPY_NAMES)
def test_caffepy_names(name):
    import caffepy
    assert getattr(caffepy, name) is not None


@pytest.mark.parametrize("module", CAFFE_MODULES)
def test_caffe_alias_modules(module):
    assert importlib.import_module(module) is not None


def test_caffe_names_are_caffepys():
    import caffe
    import caffepy
    assert caffe.Net is caffepy.Net and caffe.Layer is caffepy.Layer
    assert caffe.proto.caffe_pb2.NetParameter is caffepy.proto.caffe_pb2.NetParameter


@pytest.mark.parametrize("module", sorted(MODULE_NAMES))
def test_module_names(module):
    mod = importlib.import_module(module)
    missing = [n for n in MODULE_NAMES[module] if not hasattr(mod, n)]
    assert not missing, (module, missing)


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_old_module_paths(old):
    module = importlib.import_module(old)
    assert module is importlib.import_module(OLD_PATHS[old])
    assert module.__name__ == OLD_PATHS[old]


def test_from_old_path_import_names():
    from caffepy.contrib import builtin_layer_class
    from caffepy.contrib.frcnn.proposal import ProposalLayer
    from caffepy.layers.fork_detection import PriorBoxLayer  # noqa: F401
    assert builtin_layer_class("rpn.proposal_layer", "ProposalLayer") is ProposalLayer
