"""Several stand-ins for one Python-layer name (caffepy.layers.stand_ins): each declares its form
(bottom / top counts, param_str keys, bottom shapes); the first registered that fits is chosen,
and a layer that fits none is an error naming the forms known."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.layers import stand_ins
from caffepy.layers.base import load_all
from caffepy.layers.python_layer import Layer
from caffepy.layers.stand_ins import StandInForm, param_str_keys
from caffepy.testing import make_blobs, make_layer, run_layer

MODULE = "no_such_fork.layers"


class _Toy(Layer):
    def setup(self, bottom, top):
        top[0].reshape(1)

    def forward(self, bottom, top):
        top[0].data[...] = self.mark


class OneBottom(_Toy):
    mark = 1
    stand_in_form = StandInForm("fork A", bottoms=1, tops=1)


class TwoBottoms(_Toy):
    mark = 2
    stand_in_form = StandInForm("fork B", bottoms=2, tops=(1, 2))


class TwoBottomsKeyed(_Toy):
    mark = 3
    stand_in_form = StandInForm("fork C", bottoms=2, tops=1, keys=("mode",))


def _wide(param_str, shapes):
    return None if shapes[0][1] >= 10 else "channels %d < 10" % shapes[0][1]


class WideBottom(_Toy):
    mark = 4
    stand_in_form = StandInForm("fork D", bottoms=1, tops=1, shapes=_wide, note="10+ channels")


class NoForm(_Toy):
    mark = 5


@pytest.fixture
def registry(monkeypatch):
    """A fresh stand-in table holding nothing but what a test registers (the families have
    registered theirs in the real one first)."""
    load_all()
    table = {}
    monkeypatch.setattr(stand_ins, "_STAND_INS", table)

    def register(*classes, layer="Toy"):
        for cls in classes:
            stand_ins.register_stand_in(MODULE, layer, "%s:%s" % (__name__, cls.__name__))
        return table
    return register


def _run(bottoms, tops=1, param_str=""):
    layer = make_layer('type: "Python" python_param { module: "%s" layer: "Toy" param_str: "%s" }'
                       % (MODULE, param_str))
    run_layer(layer, make_blobs(bottoms), make_blobs(tops))
    return layer


def test_the_form_that_fits_the_counts_is_chosen(registry):
    registry(OneBottom, TwoBottoms)
    assert type(_run([np.zeros((1, 3))]).py_layer) is OneBottom
    assert type(_run([np.zeros((1, 3))] * 2).py_layer) is TwoBottoms
    assert type(_run([np.zeros((1, 3))] * 2, tops=2).py_layer) is TwoBottoms


def test_param_str_keys_and_registration_order(registry):
    registry(TwoBottomsKeyed, TwoBottoms)
    # both fit with 'mode': the first registered wins; without it, only fork B's form fits
    assert type(_run([np.zeros(2)] * 2, param_str="'mode': 1").py_layer) is TwoBottomsKeyed
    assert type(_run([np.zeros(2)] * 2, param_str="'other': 1").py_layer) is TwoBottoms


def test_bottom_shapes_choose_where_the_counts_do_not(registry):
    registry(WideBottom, OneBottom)
    assert type(_run([np.zeros((1, 12))]).py_layer) is WideBottom
    assert type(_run([np.zeros((1, 3))]).py_layer) is OneBottom


def test_no_form_fits_names_each_form_and_why(registry):
    registry(OneBottom, TwoBottomsKeyed, WideBottom)
    with pytest.raises(NetError) as e:
        _run([np.zeros((1, 3))] * 2, tops=2)
    text = str(e.value)
    assert "layer 'L' (Python): cannot import python_param.module 'no_such_fork.layers'" in text
    assert "no stand-in of caffepy's for no_such_fork.layers.Toy takes this layer " \
           "(2 bottoms: (1, 3), (1, 3); 2 tops)" in text
    assert "fork A's layer [1 bottom, 1 top] does not fit: it has 2 bottoms; it has 2 tops" in text
    assert "fork C's layer [2 bottoms, 1 top, param_str keys mode] does not fit: it has 2 tops; " \
           "param_str has no mode" in text
    assert "fork D's layer [1 bottom, 1 top, 10+ channels] does not fit" in text


def test_no_shapes_fit(registry):
    registry(WideBottom)
    with pytest.raises(NetError, match=r"takes this layer \(1 bottom: \(1, 3\); 1 top\); the "
                                       r"forms known: fork D's layer \[.*\] does not fit: "
                                       r"channels 3 < 10"):
        _run([np.zeros((1, 3))])


def test_a_class_without_a_form_takes_any_layer(registry):
    registry(OneBottom, NoForm)
    assert type(_run([np.zeros(1)] * 3, tops=1).py_layer) is NoForm


def test_registering_twice_keeps_one_entry(registry):
    table = registry(OneBottom, OneBottom)
    assert table[(MODULE, "Toy")] == ["%s:OneBottom" % __name__]
    assert stand_ins.builtin_layer_class(MODULE, "Toy") is OneBottom
    assert stand_ins.builtin_layer_class(MODULE, "Other") is None


@pytest.mark.parametrize("text, keys", [
    ("'feat_stride': 16", {"feat_stride"}),
    ("{'feat_stride': 8, 'scales': [1, 2], \"ratios\": [1,]}", {"feat_stride", "scales", "ratios"}),
    ("feat_stride: 8\nscales: !!python/tuple [4, 8]", {"feat_stride", "scales"}),
    ("2.5", set()),
])
def test_param_str_keys(text, keys):
    assert param_str_keys(text) == keys
