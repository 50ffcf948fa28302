"""Every net in ../shared/modelzoo/bvlc draws to SVG and PNG."""
import glob
import os

import pytest

import caffepy.draw as draw
from caffepy.proto import caffe_pb2, io
from tests.conftest import SHARED
from tests.draw.helpers import needs_engine, png_size, svg_texts

ZOO = os.path.join(SHARED, "modelzoo", "bvlc")
NETS = sorted(p for p in glob.glob(os.path.join(ZOO, "**", "*.prototxt"), recursive=True)
              if "solver" not in os.path.basename(p))


@pytest.fixture(scope="module")
def engine():
    needs_engine()


@pytest.mark.skipif(not NETS, reason="needs ../shared/modelzoo/bvlc")
@pytest.mark.parametrize("path", NETS, ids=lambda p: os.path.relpath(p, ZOO))
def test_zoo_net_draws(engine, path):
    param = io.read_net(path)
    names = [lp.name for lp in param.layer]
    assert names, "no layers parsed"
    doc = draw.net_json(param)
    dot = draw.to_dot(doc, rankdir="TB" if draw.graph_depth(doc) > 16 else "LR")
    svg = draw.render_dot(dot, "svg")
    texts = svg_texts(svg)
    missing = [n for n in names if n not in texts]
    assert not missing, missing
    w, h = png_size(draw.render_dot(dot, "png"))
    assert min(w, h) >= 20 and max(w, h) >= 100, (w, h)
    assert max(w, h) <= 40000 and w * h <= 60e6, (w, h)


def test_zoo_found():
    if not os.path.isdir(ZOO):
        pytest.skip("needs ../shared/modelzoo/bvlc")
    assert len(NETS) >= 20
    assert all(isinstance(io.read_net(p), caffe_pb2.NetParameter) for p in NETS[:3])
