"""Lenient reading of values Caffe's parser refuses: template placeholders, bool literals given
to integer fields, bare words given to string fields, ``//`` comments (strict keeps the error)."""
import pytest

from caffepy.errors import ProtoError
from caffepy.proto import caffe_pb2, io, unknown_fields

TEMPLATE = '''name: "t"  // a C++-style comment, "quoted // not one"
input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: ${NUM_OUT} kernel_size: 3 pad: {{pad}} stride: $STRIDE }
}
layer { name: "fc" type: "InnerProduct" bottom: "conv" top: "fc"
  inner_product_param { num_output: NUM_LABELS bias_term: true }
  param { lr_mult: {lr} }
}
layer { name: "data2" type: "Data" top: "d2" data_param { source: TRAIN_LMDB batch_size: 2 } }
layer { name: "reg" type: "Slice" bottom: "fc" top: "a" top: "b" slice_param { axis: true } }
'''


def test_strict_keeps_the_parsers_error():
    with pytest.raises(ProtoError, match=r"<string>:1:\d+: .*Expected identifier"):
        io.read_net(TEMPLATE, strict=True)


def test_lenient_reading_repairs_each_value_and_names_it(caplog):
    with unknown_fields.lenient(), caplog.at_level("WARNING"):
        net = io.read_net(TEMPLATE, upgrade=False)
    conv = net.layer[0].convolution_param
    assert net.name == "t" and list(conv.kernel_size) == [3]
    assert not len(conv.pad) and not len(conv.stride)
    fc = net.layer[1]
    assert conv.num_output == fc.inner_product_param.num_output == 10   # the stand-in class count
    assert fc.inner_product_param.bias_term
    assert not fc.param[0].HasField("lr_mult")
    assert net.layer[2].data_param.source == "TRAIN_LMDB"
    assert net.layer[3].slice_param.axis == 1
    (warning,) = [r.getMessage() for r in caplog.records if "read leniently" in r.getMessage()]
    for part in ("line 4 num_output: ${NUM_OUT} (template placeholder: a stand-in class count "
                 "of 10", "line 4 pad: {{pad}} (template placeholder: left unset",
                 "line 4 stride: $STRIDE", "line 8 lr_mult: {lr}",
                 "line 7 num_output: NUM_LABELS (template placeholder: a stand-in class count", 'line 10: TRAIN_LMDB read as the string "TRAIN_LMDB"',
                 "line 11: true read as 1 (an integer field)", "1 '//' comment(s)"):
        assert part in warning, part


def test_what_cannot_be_put_right_stays_the_first_error():
    with unknown_fields.lenient(), pytest.raises(ProtoError, match="num_output: 1&"):
        io.read_net('layer { name: "fc" type: "InnerProduct" inner_product_param '
                    '{ num_output: 1& } }')
    with unknown_fields.lenient(), pytest.raises(ProtoError, match="DOCTYPE"):
        io.read_net('<!DOCTYPE html>\n<html></html>\n')


CONFLICTED = '''<<<<<<< HEAD
name: "ours"
input: "data"
input_dim: [1 3 8 8]
=======
name: "theirs"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 10 input_dim: 10
>>>>>>> origin/master
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
<<<<<<< HEAD
  convolution_param { num_output: 4 kernel_size: 3 }
||||||| merged common ancestors
  convolution_param { num_output: 5 kernel_size: 3 }
=======
  convolution_param { num_output: 6 kernel_size: 3 }
>>>>>>> origin/master
}
'''


def test_a_merge_conflict_reads_as_its_first_side_and_a_blank_separated_list_as_a_list(caplog):
    """A git merge conflict committed into a net (both sides a net) and ``input_dim: [1 3 8 8]``:
    read leniently, the first side of each conflict kept (its lines keep their numbers), the list
    read with its four values; strict keeps the parser's error at the first marker."""
    with pytest.raises(ProtoError, match=r"<string>:1:1: '<<<<<<< HEAD'"):
        io.read_net(CONFLICTED, strict=True)
    with unknown_fields.lenient(), caplog.at_level("WARNING"):
        net = io.read_net(CONFLICTED, upgrade=False)
    assert net.name == "ours" and list(net.input_dim) == [1, 3, 8, 8]
    assert net.layer[0].convolution_param.num_output == 4
    (warning,) = [r.getMessage() for r in caplog.records if "read leniently" in r.getMessage()]
    assert "2 git merge conflict(s) read as their first side" in warning
    assert "line 4: [1 3 8 8] read as a list of 4 values" in warning
    unclosed = CONFLICTED.replace(">>>>>>> origin/master\n}", "}")
    with unknown_fields.lenient(), pytest.raises(ProtoError, match="<<<<<<< HEAD"):
        io.read_net(unclosed, upgrade=False)
    words = 'name: "n" input: "data" input_dim: [1 three 8 8]'
    with unknown_fields.lenient(), pytest.raises(ProtoError, match=r"Expected \",\""):
        io.read_net(words, upgrade=False)


def test_a_bare_word_with_dashes_reads_as_the_string(caplog):
    text = 'name: VGG-CNN-S\nlayer { name: "d" type: "Input" top: "data" }'
    with pytest.raises(ProtoError, match="Expected string"):
        io.read_net(text, strict=True)
    with unknown_fields.lenient(), caplog.at_level("WARNING"):
        assert io.read_net(text, upgrade=False).name == "VGG-CNN-S"
    assert any('VGG-CNN-S read as the string "VGG-CNN-S"' in r.getMessage()
               for r in caplog.records)


MOBILENET_SSD_TEMPLATE = '''name: "t"
layer { name: "conf" type: "Convolution" bottom: "x" top: "conf"
  convolution_param { num_output: cls3x kernel_size: 1 } }
layer { name: "r" type: "Reshape" bottom: "conf" top: "r"
  reshape_param { shape { dim: 0 dim: -1 dim: cls1x } } }
layer { name: "out" type: "DetectionOutput" bottom: "r" top: "out"
  detection_output_param { num_classes: cls1x } }
'''


def test_mobilenet_ssd_template_words_take_multiples_of_the_class_count(caplog):
    """chuanqi305/MobileNet-SSD's templates: gen_model.sh writes N x the class count for clsNx,
    in any field (num_output, a Reshape dim, num_classes); read leniently with --num-classes, or
    a stand-in class count, each named in the WARNING; strict keeps the parser's error."""
    from caffepy.proto import digits
    with pytest.raises(ProtoError, match="cls3x"):
        io.read_net(MOBILENET_SSD_TEMPLATE, strict=True)
    with unknown_fields.lenient(), digits.class_count(21), caplog.at_level("WARNING"):
        net = io.read_net(MOBILENET_SSD_TEMPLATE, upgrade=False)
    assert net.layer[0].convolution_param.num_output == 63
    assert list(net.layer[1].reshape_param.shape.dim) == [0, -1, 21]
    assert net.layer[2].detection_output_param.num_classes == 21
    (warning,) = [r.getMessage() for r in caplog.records if "read leniently" in r.getMessage()]
    assert "line 3 num_output: cls3x (MobileNet-SSD's template: 3 x the class count, 21)" \
        in warning
    with unknown_fields.lenient():
        net = io.read_net(MOBILENET_SSD_TEMPLATE, upgrade=False)
    assert net.layer[0].convolution_param.num_output == 3 * digits.STAND_IN
