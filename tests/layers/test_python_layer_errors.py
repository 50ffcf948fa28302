"""Errors in a Python layer's own code reach the user as one line naming the layer: a caffepy
error its code meets (a ``caffe.Net`` of a file that is not there) as well as any other, and an
exception Python cannot raise (a ``__del__``) as one WARNING of the command, not a traceback."""
import sys

import pytest

import caffepy
from caffepy import cli
from caffepy.errors import NetError

LOADER = '''
import caffe


class Handle(object):
    def __init__(self):
        raise IOError("no data set here")

    def __del__(self):
        if self._file:            # never set: __init__ failed first
            pass


class Features(caffe.Layer):
    def setup(self, bottom, top):
        try:
            Handle()
        except IOError:
            pass
        self.net = caffe.Net("/nonexistent/deploy.prototxt", caffe.TEST)

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data
'''

NET = '''input: "x" input_shape { dim: 1 dim: 2 }
layer { name: "feat" type: "Python" bottom: "x" top: "y"
        python_param { module: "features_of_a_missing_net" layer: "Features" } }
'''


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    (tmp_path / "features_of_a_missing_net.py").write_text(LOADER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("features_of_a_missing_net", None)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # its __del__
def test_a_caffepy_error_met_by_the_users_code_names_the_layer(module_dir):
    path = module_dir / "net.prototxt"
    path.write_text(NET)
    with pytest.raises(NetError) as info:
        caffepy.Net(str(path), caffepy.TEST)
    text = str(info.value)
    assert "layer 'feat' (Python)" in text and "raised ProtoError in setup" in text
    assert "/nonexistent/deploy.prototxt" in text and "features_of_a_missing_net.py:" in text


def test_the_command_prints_no_traceback_for_an_error_in_a_destructor(module_dir, capfd):
    path = module_dir / "net.prototxt"
    path.write_text(NET)
    assert cli.main(["summary", "--strict", str(path)]) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "Exception ignored in Handle.__del__: AttributeError:" in err
    assert err.strip().splitlines()[-1].startswith("caffepy summary: error: ")
    assert sys.unraisablehook is not cli._unraisable


MISSING = '''name: "n"
input: "data" input_shape { dim: 1 dim: 3 }
layer { name: "loss" type: "Python" bottom: "data" top: "y"
  python_param { module: "mylayers.data" layer: "Loss" } }
layer { name: "ip" type: "InnerProduct" bottom: "y" top: "z" inner_product_param { num_output: 2 } }
'''


def test_a_missing_module_found_near_the_net_is_named_not_imported(tmp_path, capsys):
    """The repository's own Python layers: the error says where the module sits; the file is
    not imported (it would raise)."""
    pkg = tmp_path / "repo" / "python" / "mylayers"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data.py").write_text("raise RuntimeError('imported')\n")
    net = tmp_path / "repo" / "models" / "lenet" / "train.prototxt"
    net.parent.mkdir(parents=True)
    net.write_text(MISSING)
    with pytest.raises(NetError, match=r"No module named 'mylayers' \(the module is in .*"
                                       r"repo/python: put that directory on PYTHONPATH\)"):
        caffepy.Net(str(net), caffepy.TEST)
    assert cli.main(["summary", str(net)]) == 0
    assert "is not importable (the module is in %s" % (tmp_path / "repo" / "python") in \
        capsys.readouterr().err
    (pkg / "data.py").unlink()                         # not there: the error says no more
    with pytest.raises(NetError) as e:
        caffepy.Net(str(net), caffepy.TEST)
    assert "PYTHONPATH" not in str(e.value) and "mylayers" not in sys.modules
