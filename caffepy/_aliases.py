"""Old module paths that scripts may import, resolved to where the code lives now.

``import caffepy.contrib.frcnn.proposal`` (a ``python_param.module`` some pycaffe scripts name),
``from caffepy.layers.fork_yolo import ...``, ``import caffepy.optimize`` ... give the module at
its current path (the same module object, under both names). Installed on ``sys.meta_path`` by
``caffepy/__init__``; the longest matching old prefix wins.
"""
import importlib
import importlib.abc
import importlib.util

OLD_PATHS = {
    'caffepy.blas': 'caffepy.math.blas',
    'caffepy.blob_sync': 'caffepy.blob.synced',
    'caffepy.classifier': 'caffepy.pycaffe.classifier',
    'caffepy.contrib': 'caffepy.forks',
    'caffepy.contrib.ctpn': 'caffepy.forks.ocr.ctpn',
    'caffepy.contrib.detectnet': 'caffepy.forks.nvcaffe.detectnet',
    'caffepy.contrib.frcnn': 'caffepy.forks.detection.frcnn',
    'caffepy.contrib.pyloss': 'caffepy.forks.misc.pyloss',
    'caffepy.contrib.spatial_dropout': 'caffepy.forks.segmentation.spatial_dropout',
    'caffepy.coord_map': 'caffepy.pycaffe.coord_map',
    'caffepy.detector': 'caffepy.pycaffe.detector',
    'caffepy.launcher': 'caffepy.log',
    'caffepy.layers._flow_augment': 'caffepy.forks.flownet.augment_math',
    'caffepy.layers.fork_amsoftmax': 'caffepy.forks.face.amsoftmax',
    'caffepy.layers.fork_arcface': 'caffepy.forks.face.arcface',
    'caffepy.layers.fork_caffepro': 'caffepy.forks.misc.caffepro',
    'caffepy.layers.fork_cascade_rcnn': 'caffepy.forks.detection.cascade_rcnn',
    'caffepy.layers.fork_cascade_target': 'caffepy.forks.detection.cascade_target',
    'caffepy.layers.fork_cascade_train': 'caffepy.forks.detection.cascade_train',
    'caffepy.layers.fork_crfasrnn': 'caffepy.forks.segmentation.crfasrnn',
    'caffepy.layers.fork_ctc': 'caffepy.forks.ocr.ctc',
    'caffepy.layers.fork_deconvnet': 'caffepy.forks.segmentation.deconvnet',
    'caffepy.layers.fork_deeplab': 'caffepy.forks.segmentation.deeplab',
    'caffepy.layers.fork_deeplab_v1': 'caffepy.forks.segmentation.deeplab_v1',
    'caffepy.layers.fork_detection': 'caffepy.forks.ssd.detection',
    'caffepy.layers.fork_detectnet': 'caffepy.forks.nvcaffe.detectnet_transform',
    'caffepy.layers.fork_face': 'caffepy.forks.face.losses',
    'caffepy.layers.fork_flow': 'caffepy.forks.flownet.flow',
    'caffepy.layers.fork_flow_aug': 'caffepy.forks.flownet.augment',
    'caffepy.layers.fork_flow_data': 'caffepy.forks.flownet.data',
    'caffepy.layers.fork_flow_extra': 'caffepy.forks.flownet.extra',
    'caffepy.layers.fork_flow_io': 'caffepy.forks.flownet.files',
    'caffepy.layers.fork_flow_loss': 'caffepy.forks.flownet.loss',
    'caffepy.layers.fork_focal': 'caffepy.forks.face.focal',
    'caffepy.layers.fork_happynear': 'caffepy.forks.face.inner_distance',
    'caffepy.layers.fork_lse': 'caffepy.forks.face.lse',
    'caffepy.layers.fork_margin': 'caffepy.forks.face.margin',
    'caffepy.layers.fork_misc': 'caffepy.forks.misc.layers',
    'caffepy.layers.fork_mscnn': 'caffepy.forks.detection.mscnn',
    'caffepy.layers.fork_mscnn_train': 'caffepy.forks.detection.mscnn_train',
    'caffepy.layers.fork_multibox': 'caffepy.forks.ssd.multibox',
    'caffepy.layers.fork_nvcaffe': 'caffepy.forks.nvcaffe.batchnorm',
    'caffepy.layers.fork_nvcaffe_trt': 'caffepy.forks.nvcaffe.trt',
    'caffepy.layers.fork_ocr': 'caffepy.forks.ocr.caffe_ocr',
    'caffepy.layers.fork_ohem': 'caffepy.forks.detection.ohem',
    'caffepy.layers.fork_psanet': 'caffepy.forks.segmentation.psanet',
    'caffepy.layers.fork_rfcn': 'caffepy.forks.detection.rfcn',
    'caffepy.layers.fork_roi': 'caffepy.forks.detection.roi',
    'caffepy.layers.fork_segnet': 'caffepy.forks.segmentation.segnet',
    'caffepy.layers.fork_ssd_eval': 'caffepy.forks.ssd.evaluate',
    'caffepy.layers.fork_ssl': 'caffepy.forks.misc.ssl',
    'caffepy.layers.fork_textboxes': 'caffepy.forks.ssd.textboxes',
    'caffepy.layers.fork_textboxes_polygon': 'caffepy.forks.ssd.textboxes_polygon',
    'caffepy.layers.fork_tsn': 'caffepy.forks.video.tsn',
    'caffepy.layers.fork_video': 'caffepy.forks.video.video3d',
    'caffepy.layers.fork_video_data': 'caffepy.forks.video.data',
    'caffepy.layers.fork_vision': 'caffepy.forks.misc.vision',
    'caffepy.layers.fork_warpctc': 'caffepy.forks.ocr.warpctc',
    'caffepy.layers.fork_yolo': 'caffepy.forks.yolo.output',
    'caffepy.layers.fork_yolo_gaussian': 'caffepy.forks.yolo.gaussian',
    'caffepy.layers.fork_yolo_iou': 'caffepy.forks.yolo.iou',
    'caffepy.layers.fork_yolo_loss': 'caffepy.forks.yolo.loss',
    'caffepy.layers.fork_yolo_seg': 'caffepy.forks.yolo.seg',
    'caffepy.layers.fork_yolo_v1': 'caffepy.forks.yolo.v1',
    'caffepy.math.infer_kernels': 'caffepy.infer.kernels',
    'caffepy.net_params': 'caffepy.net.params',
    'caffepy.net_passes': 'caffepy.net.passes',
    'caffepy.netspec_fields': 'caffepy.netspec.fields',
    'caffepy.optimize': 'caffepy.infer.plan',
    'caffepy.optimize_fold': 'caffepy.infer.fold',
    'caffepy.optimize_shards': 'caffepy.infer.shards',
    'caffepy.optimize_steps': 'caffepy.infer.steps',
    'caffepy.optimize_threads': 'caffepy.infer.threads',
    'caffepy.optimize_winograd': 'caffepy.infer.winograd',
    'caffepy.summary': 'caffepy.zoo.summary',
    'caffepy.weights': 'caffepy.net.weights',
    'caffepy.zoo_mscnn': 'caffepy.forks.detection.zoo_mscnn',
    'caffepy.zoo_run': 'caffepy.zoo.run',
}


def current_name(fullname):
    """The current module name of an old path (or a module under one), or None."""
    parts = fullname.split(".")
    for i in range(len(parts), 1, -1):
        new = OLD_PATHS.get(".".join(parts[:i]))
        if new is not None:
            return ".".join([new] + parts[i:])
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target
        self.spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec      # the import system set the alias's spec: keep the module's own


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds old module paths (:data:`OLD_PATHS`) and loads the module at its current path."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("caffepy."):
            return None
        new = current_name(fullname)
        if new is None or new == fullname:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))
