"""User Python layers first: a user's ``rpn/proposal_layer.py`` wins over caffepy's built-in
py-faster-rcnn layer; the built-in stands in only when the module does not import, with a WARNING
line (Python API and ``caffepy summary``); a user layer that starts with ``import caffe`` loads."""
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import caffe

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RPN_NET = """name: 'rpn'
input: 'scores' input_shape { dim: 1 dim: 18 dim: 4 dim: 5 }
input: 'deltas' input_shape { dim: 1 dim: 36 dim: 4 dim: 5 }
input: 'im_info' input_shape { dim: 1 dim: 3 }
layer { name: 'proposal' type: 'Python' bottom: 'scores' bottom: 'deltas' bottom: 'im_info'
  top: 'rois' python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer'
  param_str: "'feat_stride': 16" } }
"""

USER_PROPOSAL = """import caffe
import numpy as np


class ProposalLayer(caffe.Layer):
    '''The user's own proposal layer: one box of sevens.'''

    def setup(self, bottom, top):
        self.stride = eval('{' + self.param_str + '}')['feat_stride']

    def reshape(self, bottom, top):
        top[0].reshape(1, 5)

    def forward(self, bottom, top):
        top[0].data[...] = 7 * self.stride

    def backward(self, top, propagate_down, bottom):
        pass
"""


@pytest.fixture
def clean_rpn():
    """Forget any imported ``rpn`` package before and after the test."""
    def forget():
        for name in [m for m in sys.modules if m == "rpn" or m.startswith("rpn.")]:
            del sys.modules[name]
    forget()
    yield
    forget()


@pytest.fixture
def warnings_seen():
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("caffepy")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_user_rpn_module_wins_over_builtin(tmp_path, monkeypatch, clean_rpn, warnings_seen):
    (tmp_path / "rpn").mkdir()
    (tmp_path / "rpn" / "__init__.py").write_text("")
    (tmp_path / "rpn" / "proposal_layer.py").write_text(USER_PROPOSAL)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "net.prototxt").write_text(RPN_NET)
    net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TEST)
    layer = net.layer_dict["proposal"].py_layer
    assert type(layer).__module__ == "rpn.proposal_layer"
    assert np.all(net.forward()["rois"] == 7 * 16)
    assert not warnings_seen


def test_user_rpn_module_that_fails_is_reported_not_replaced(tmp_path, monkeypatch, clean_rpn,
                                                            warnings_seen):
    (tmp_path / "rpn").mkdir()
    (tmp_path / "rpn" / "__init__.py").write_text("")
    (tmp_path / "rpn" / "proposal_layer.py").write_text(
        "import caffe\nfrom fast_rcnn_lib_not_on_path.config import cfg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "net.prototxt").write_text(RPN_NET)
    with pytest.raises(caffe.errors.CaffeError,
                       match=r"layer 'proposal' \(Python\): cannot import python_param.module "
                             r"'rpn.proposal_layer'.*No module named 'fast_rcnn_lib_not_on_path'.*"
                             r"stand-in for rpn.proposal_layer.ProposalLayer is used only when"):
        caffe.Net(str(tmp_path / "net.prototxt"), caffe.TEST)
    assert not warnings_seen


def test_builtin_stands_in_with_a_warning(tmp_path, clean_rpn, warnings_seen):
    (tmp_path / "net.prototxt").write_text(RPN_NET)
    net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TEST)
    assert type(net.layer_dict["proposal"].py_layer).__module__ == "caffepy.forks.detection.frcnn.proposal"
    assert len(warnings_seen) == 1
    text = warnings_seen[0].getMessage()
    assert "caffepy.forks.detection.frcnn.proposal.ProposalLayer stands in for " \
           "rpn.proposal_layer.ProposalLayer" in text and "No module named 'rpn'" in text
    # the same line from `caffepy summary`, on stderr, as a glog WARNING
    out = subprocess.run([sys.executable, "-m", "caffepy", "summary", str(tmp_path / "net.prototxt")],
                         capture_output=True, text=True, cwd=str(tmp_path), timeout=60,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stderr.splitlines() if "stands in" in ln]
    assert len(line) == 1 and line[0].startswith("W"), out.stderr
    assert "proposal" in out.stdout


def test_user_loss_layer_with_import_caffe(tmp_path, user_pyloss, warnings_seen):
    """pyloss's EuclideanLossLayer as users write it (``import caffe``: tests/fixtures/pyloss.py)
    wins over the built-in pyloss stand-in and matches the built-in EuclideanLoss layer."""
    net_text = """name: 'LinearRegressionExample' force_backward: true
layer { type: 'DummyData' name: 'x' top: 'x' dummy_data_param { shape: { dim: 10 dim: 3 dim: 2 }
  data_filler: { type: 'gaussian' } } }
layer { type: 'DummyData' name: 'y' top: 'y' dummy_data_param { shape: { dim: 10 dim: 3 dim: 2 }
  data_filler: { type: 'gaussian' } } }
layer { type: 'InnerProduct' name: 'ipx' top: 'ipx' bottom: 'x'
  inner_product_param { num_output: 10 weight_filler { type: 'xavier' } } }
layer { type: 'InnerProduct' name: 'ipy' top: 'ipy' bottom: 'y'
  inner_product_param { num_output: 10 weight_filler { type: 'xavier' } } }
layer { type: '%s' name: 'loss' top: 'loss' bottom: 'ipx' bottom: 'ipy' %s loss_weight: 1 }
"""
    py = tmp_path / "linreg.prototxt"
    py.write_text(net_text % ("Python", "python_param { module: 'pyloss' "
                                        "layer: 'EuclideanLossLayer' }"))
    ref = tmp_path / "ref.prototxt"
    ref.write_text(net_text % ("EuclideanLoss", ""))
    nets, losses = [], []
    for path in (py, ref):                  # same seed, same draws: DummyData refills on forward
        caffe.set_random_seed(5)
        nets.append(caffe.Net(str(path), caffe.TRAIN))
        losses.append(nets[-1].forward()["loss"].ravel()[0])
        nets[-1].backward()
    net, ref_net = nets
    assert type(net.layer_dict["loss"].py_layer).__module__ == "pyloss"
    assert not warnings_seen
    assert np.isclose(losses[0], losses[1], rtol=1e-5)
    assert np.allclose(net.params["ipx"][0].diff, ref_net.params["ipx"][0].diff, atol=1e-5)
