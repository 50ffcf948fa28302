"""NVIDIA DIGITS' classification networks: the class count DIGITS writes in when it trains.

What DIGITS does (NVIDIA/DIGITS, digits/model/tasks/caffe_train.py): a classification job keeps
the network text the user gave and writes train_val and deploy files from it.
``cleanedUpClassificationNetwork(network, len(labels))`` gives every ``InnerProduct`` layer whose
``inner_product_param`` has no ``num_output`` field the dataset's class count (no other type: a
Convolution classifier must name its count; a ``num_output: 0`` written out is not filled, the
test is ``HasField``). ``filterLayersByState`` then splits the text by three NetStates, each
decided by Caffe's own include / exclude rules: phase TRAIN with stage ``"train"``, phase TEST
with stage ``"val"`` (train_val) and phase TEST with stage ``"deploy"`` (deploy). caffepy's Net
applies those rules (``stages=``, ``--stage``), so only the class count is DIGITS' to supply;
summary, asked for a phase of a net whose data layers are given to stages, tries DIGITS' stage
of that phase first (:data:`STAGE_OF_PHASE`, caffepy.net.passes).

Rule here: a net is *recognisably a DIGITS network* when a layer's include or exclude rule names
one of DIGITS' stages (``train``, ``val``, ``deploy``); then, and only then, its InnerProduct
layers without ``num_output`` take the class count (:func:`class_layers`); in any other file they
stay Caffe's error ("num_output must be positive"). This is the convention of the tool that
wrote the file, valid Caffe text that DIGITS completes, not a repair of text Caffe refuses: the
strict readings (``summary --strict``, ``Net``) accept it too.

The count: ``num_classes`` (``--num-classes N`` on summary / draw / time / test / train,
``Net(..., num_classes=N)``, or :func:`class_count` around code that builds nets, such as a
Solver). Without one, building a net that needs it is a one-line error saying so (DIGITS reads
the count from its dataset job's labels file, which the network file does not name); summary and
draw use :data:`STAND_IN` instead and say so in one WARNING naming the layers (:func:`complete`).
"""
import contextlib
import contextvars
import logging

from ..errors import NetError
from . import caffe_pb2

DIGITS_STAGES = frozenset(["train", "val", "deploy"])
STAGE_OF_PHASE = {caffe_pb2.TRAIN: "train", caffe_pb2.TEST: "val"}   # train_val's two NetStates
STAND_IN = 10
_COUNT = contextvars.ContextVar("caffepy_digits_class_count", default=None)
_log = logging.getLogger("caffepy.proto.digits")


def is_digits_network(net_param):
    """Whether a layer's include / exclude rule names one of DIGITS' stages."""
    return any(stage in DIGITS_STAGES
               for lp in net_param.layer for rule in list(lp.include) + list(lp.exclude)
               for stage in list(rule.stage) + list(rule.not_stage))


def class_layers(net_param):
    """The LayerParameters whose num_output is the class count DIGITS supplies (module doc)."""
    if not is_digits_network(net_param):
        return []
    return [lp for lp in net_param.layer
            if lp.type == "InnerProduct" and not lp.inner_product_param.HasField("num_output")]


@contextlib.contextmanager
def class_count(num_classes):
    """Within the block, nets built without ``num_classes`` take this one (None: none given)."""
    token = _COUNT.set(_checked(num_classes))
    try:
        yield
    finally:
        _COUNT.reset(token)


def _checked(num_classes):
    if num_classes is not None and (isinstance(num_classes, bool) or int(num_classes) != num_classes
                                    or num_classes <= 0):
        raise NetError("the class count must be a positive integer, got %r" % (num_classes,))
    return None if num_classes is None else int(num_classes)


def complete(net_param, num_classes=None, filename="<NetParameter>", stand_in=False):
    """Give ``net_param``'s DIGITS class layers (:func:`class_layers`) ``num_classes`` (else the
    one of :func:`class_count`) as num_output, in place; returns their names.

    Without a count: ``stand_in`` uses :data:`STAND_IN` with one WARNING naming the layers;
    otherwise a one-line NetError asks for the count."""
    layers = class_layers(net_param)
    names = [lp.name for lp in layers]
    if not layers:
        return names
    count = _checked(num_classes) if num_classes is not None else _COUNT.get()
    listed = ", ".join("'%s'" % n for n in names)
    if count is None and not stand_in:
        raise NetError("%s: a DIGITS classification network: InnerProduct layer(s) %s leave "
                       "num_output to the dataset's class count; pass --num-classes N "
                       "(Net(..., num_classes=N))" % (filename, listed))
    if count is None:
        count = STAND_IN
        _log.warning("%s: a DIGITS classification network: InnerProduct layer(s) %s take a "
                     "stand-in class count of %d as num_output (DIGITS sets the dataset's; "
                     "--num-classes N gives it)", filename, listed, count)
    for lp in layers:
        lp.inner_product_param.num_output = count
    return names
