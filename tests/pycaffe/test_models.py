"""models/: each DSL module regenerates its committed .prototxt byte for byte, and each generated
net is equivalent to the public file it reproduces (layers, types, parameters, wiring, shapes)."""
import importlib.util
import os

import pytest

from tests.conftest import ROOT, shared_path
from tests.pycaffe.models_compare import differences

MODELS = os.path.join(ROOT, "models")
ZOO = ("modelzoo",)
# (module, generated file, reference under ../shared/modelzoo, compare fillers/params, phases)
CASES = [
    ("lenet/lenet_netspec.py", "lenet/lenet_netspec_train_test.prototxt",
     "bvlc/examples/mnist/lenet_train_test.prototxt", False, (0, 1)),
    ("lenet/lenet_netspec.py", "lenet/lenet_netspec_deploy.prototxt",
     "bvlc/examples/mnist/lenet.prototxt", False, (1,)),
    ("cifar10_quick/cifar10_quick_netspec.py", "cifar10_quick/cifar10_quick_train_test.prototxt",
     "bvlc/examples/cifar10/cifar10_quick_train_test.prototxt", False, (0, 1)),
    ("cifar10_quick/cifar10_quick_netspec.py", "cifar10_quick/cifar10_quick_deploy.prototxt",
     "bvlc/examples/cifar10/cifar10_quick.prototxt", False, (1,)),
    ("caffenet/caffenet_netspec.py", "caffenet/caffenet_deploy.prototxt",
     "bvlc/models/bvlc_reference_caffenet/deploy.prototxt", False, (1,)),
    ("googlenet/googlenet_netspec.py", "googlenet/googlenet_deploy.prototxt",
     "bvlc/models/bvlc_googlenet/deploy.prototxt", True, (1,)),
    ("vgg16/vgg16_netspec.py", "vgg16/vgg16_deploy.prototxt",
     "soeaver__caffe-model/cls/vgg/deploy_vgg16-pytorch.prototxt", True, (1,)),
    ("resnet50/resnet50_netspec.py", "resnet50/resnet50_deploy.prototxt",
     "KaimingHe__deep-residual-networks/prototxt/ResNet-50-deploy.prototxt", False, (1,)),
    ("squeezenet1_1/squeezenet1_1_netspec.py", "squeezenet1_1/squeezenet1_1_deploy.prototxt",
     "forresti__SqueezeNet/SqueezeNet_v1.1/deploy.prototxt", False, (1,)),
    ("mobilenet_v1/mobilenet_v1_netspec.py", "mobilenet_v1/mobilenet_v1_deploy.prototxt",
     "shicai__MobileNet-Caffe/mobilenet_deploy.prototxt", False, (1,)),
]
# the VGG-16 reference (a PyTorch conversion) names dropout and classifier layers differently
RENAMED = {"vgg16/vgg16_deploy.prototxt"}


def load_module(rel):
    path = os.path.join(MODELS, rel)
    spec = importlib.util.spec_from_file_location("model_" + rel.replace("/", "_")[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("module", sorted({c[0] for c in CASES}))
def test_regenerating_gives_the_committed_files(module, tmp_path):
    mod = load_module(module)
    from netspec_tools import write_all
    written = write_all(mod.outputs(), os.path.join(MODELS, module), str(tmp_path))
    assert written
    for path in written:
        committed = os.path.join(MODELS, os.path.dirname(module), os.path.basename(path))
        with open(path, "rb") as a, open(committed, "rb") as b:
            assert a.read() == b.read(), "%s is stale: run python models/%s" % (committed, module)


@pytest.mark.slow
@pytest.mark.parametrize("module,ours,ref,deploy,phases", CASES, ids=[c[1] for c in CASES])
def test_equivalent_to_the_public_file(module, ours, ref, deploy, phases):
    ref_path = shared_path(*(ZOO + tuple(ref.split("/"))))
    diffs = differences(os.path.join(MODELS, ours), ref_path, names=ours not in RENAMED,
                        deploy=deploy, phases=phases)
    assert diffs == [], "\n".join(diffs[:10])
