"""The input-size search against the checks of joins and strided layers: Concat of a pooled and
a strided-conv branch (Caffe's pooling rounds up, convolution down), Eltwise of two such
branches, a YOLO passthrough's Reorg (its stride must divide H and W); a mismatch fails the
candidate and the search goes on, trying first sizes divisible by the net's stride."""
import pytest

from caffepy.errors import CaffeError, ShapeError
from caffepy.proto import io as proto_io
from caffepy.zoo.candidates import candidates, stride_divisor
from caffepy.zoo.input_search import infer_input_shapes, searched_tops
from caffepy.zoo.summary import summarize

LMDB = ('layer { name: "data" type: "Data" top: "data" top: "label" '
        'data_param { source: "x" batch_size: 1 } }\n')


def _pva(stages, join="Concat"):
    """PVANet-like stages: a 3x3 / 2 max pooling (rounds up) and a 3x3 / 2 pad 1 convolution
    (rounds down) of the same blob, joined: equal only for an even H, so ``stages`` stages need
    H divisible by 2^stages. (Eltwise: the convolution keeps the channels.)"""
    out, src, ch = [], "data", 3
    for i in range(stages):
        n = ch if join == "Eltwise" else 4
        out.append(
            'layer { name: "pool%d" type: "Pooling" bottom: "%s" top: "pool%d" '
            'pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n'
            'layer { name: "conv%d" type: "Convolution" bottom: "%s" top: "conv%d" '
            'convolution_param { num_output: %d kernel_size: 3 stride: 2 pad: 1 } }\n'
            'layer { name: "join%d" type: "%s" bottom: "pool%d" bottom: "conv%d" top: "join%d" }\n'
            % (i, src, i, i, src, i, n, i, join, i, i, i))
        src = "join%d" % i
        ch = ch + 4 if join == "Concat" else ch
    return LMDB + "".join(out)


def _yolo(stages):
    """``stages`` conv + 2x2 / 2 pooling stages, then a Reorg of stride 2 (YOLOv2's passthrough)."""
    out, src = [], "data"
    for i in range(stages):
        out.append('layer { name: "conv%d" type: "Convolution" bottom: "%s" top: "conv%d" '
                   'convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n'
                   'layer { name: "pool%d" type: "Pooling" bottom: "conv%d" top: "pool%d" '
                   'pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n' % (i, src, i, i, i, i))
        src = "pool%d" % i
    out.append('layer { name: "reorg" type: "Reorg" bottom: "%s" top: "reorg" '
               'reorg_param { stride: 2 } }\n' % src)
    return LMDB + "".join(out)


def _search(text):
    inferred, notes = [], []
    rows, _ = summarize(text, inferred=inferred, notes=notes)
    assert notes == []
    return rows, inferred[0]


@pytest.mark.parametrize("join", ["Concat", "Eltwise"])
def test_a_join_of_a_pooled_and_a_strided_branch_fits_at_even_sizes_only(join):
    rows, line = _search(_pva(2, join))            # H divisible by 4: the default, 224
    assert "224 x 224" in line and "candidate 1" in line
    rows, line = _search(_pva(6, join))            # by 64: not 224 (224 / 32 = 7)
    h = rows[0].top_shapes[0][2]
    assert h % 64 == 0 and h == 256 and "256 x 256" in line
    assert rows[-1].top_shapes[0][2:] == (h // 64, h // 64)
    # at 224 the join is what fails, as a shape check (the search goes on)
    with pytest.raises(ShapeError, match="join5"):
        summarize(_pva(6, join), inputs={"data": (1, 3, 224, 224), "label": (1,)})


def test_a_join_mismatch_is_a_shape_error_for_every_branch_pair():
    """The 1-stage net at odd sizes: the pooled branch is one pixel smaller."""
    for join in ("Concat", "Eltwise"):
        with pytest.raises(ShapeError):
            summarize(_pva(1, join), inputs={"data": (1, 3, 225, 225), "label": (1,)})
        rows, _ = summarize(_pva(1, join), inputs={"data": (1, 3, 226, 226), "label": (1,)})
        assert rows[-1].top_shapes[0][2:] == (113, 113)


def test_reorg_after_four_stride_2_stages_needs_a_multiple_of_32():
    rows, line = _search(_yolo(4))
    h = rows[0].top_shapes[0][2]
    assert h % 32 == 0 and rows[-1].top_shapes == [(1, 16, h // 32, h // 32)]
    with pytest.raises(ShapeError, match="not divisible by stride 2"):
        summarize(_yolo(4), inputs={"data": (1, 3, 208, 208), "label": (1,)})   # 208 / 16 = 13


def test_reorg_mismatch_fails_the_candidate_and_the_search_moves_on():
    """Five stages and a Reorg: 224 (7 x 7 before the Reorg) fails as a shape check; the search
    goes on to the first size divisible by 64 instead of stopping or dropping the Reorg."""
    rows, line = _search(_yolo(5))
    assert rows[0].top_shapes[0] == (1, 3, 256, 256)
    assert rows[-1].name == "reorg" and rows[-1].top_shapes == [(1, 16, 4, 4)]


def test_stride_divisor_and_candidate_order():
    assert stride_divisor(proto_io.read_net(_yolo(4))) == 32
    assert stride_divisor(proto_io.read_net(_yolo(5))) == 64
    assert stride_divisor(proto_io.read_net(_pva(6))) == 64
    deconv = _yolo(2) + ('layer { name: "up" type: "Deconvolution" bottom: "reorg" top: "up" '
                         'convolution_param { num_output: 2 kernel_size: 2 stride: 2 } }\n')
    assert stride_divisor(proto_io.read_net(deconv)) == 8
    net = proto_io.read_net(_yolo(5))
    sizes = [h for _, h, _, _, _ in candidates(net, searched_tops(net), (3, 224, 224), None, {},
                                               None)]
    assert sizes[0] == 224                                # the default stays first
    after = [h for h in sizes[1:] if h != 224]
    assert after[:8] == [256, 320, 384, 448, 512, 64, 128, 192]
    # a net of stride 32 keeps the usual order (224, 227, 256, ...)
    net = proto_io.read_net(_yolo(4))
    sizes = [h for _, h, _, _, _ in candidates(net, searched_tops(net), (3, 224, 224), None, {},
                                               None)]
    assert [h for h in sizes if h != 224][:3] == [227, 256, 299]


def test_no_size_fits_is_one_error_line():
    """A Reorg of stride 3 after a Concat that needs an even H: sizes divisible by 6 pass;
    Concats with a 7 x 9 and a 9 x 7 blob: none does."""
    text = _pva(1) + ('layer { name: "reorg" type: "Reorg" bottom: "join0" top: "r" '
                      'reorg_param { stride: 3 } }\n')
    rows, line = _search(text.replace('num_output: 4', 'num_output: 6'))
    h = rows[0].top_shapes[0][2]
    assert (h // 2) % 3 == 0 and h % 2 == 0
    bad = LMDB + ('layer { name: "other" type: "Input" top: "other" input_param { shape { dim: 1 '
                  'dim: 3 dim: 7 dim: 9 } } }\n'
                  'layer { name: "cat" type: "Concat" bottom: "data" bottom: "other" top: "cat" }\n'
                  'layer { name: "wide" type: "Input" top: "wide" input_param { shape { dim: 1 '
                  'dim: 3 dim: 9 dim: 7 } } }\n'
                  'layer { name: "cat2" type: "Concat" bottom: "data" bottom: "wide" top: "c2" }\n')
    with pytest.raises(CaffeError) as info:
        infer_input_shapes(proto_io.read_net(bad), max_candidates=20)
    assert "\n" not in str(info.value) and "no input size makes every shape check pass" in \
        str(info.value)


def test_a_shape_check_a_python_layers_reshape_met_counts_as_a_wrong_size():
    from caffepy.errors import ShapeError
    from caffepy.layers.python_layer import PythonLayerError
    from caffepy.zoo.input_search import _size_failure
    assert _size_failure(PythonLayerError("x", "reshape", ShapeError("blob shape")))
    assert _size_failure(PythonLayerError("x", "reshape", IndexError("axis")))
    assert not _size_failure(PythonLayerError("x", "setup", ShapeError("blob shape")))
    assert not _size_failure(PythonLayerError("x", "reshape", KeyError("name")))


ROI_DATA = ('layer { name: "input-data" type: "Python" top: "data" top: "im_info" '
            'top: "gt_boxes" python_param { module: "roi_data_layer.layer" '
            'layer: "RoIDataLayer" param_str: "\'num_classes\': 21" } }\n')


def test_roi_data_layers_placeholder_size_is_tried_then_searched():
    """py-faster-rcnn's RoIDataLayer shapes its image 1 x 3 x 600 x 1000 at setup, a placeholder
    for each minibatch's size: a PVANet-like net that 600 x 1000 does not fit is built at a
    searched size instead; a net that it fits keeps it."""
    from caffepy.proto.harvest_policy import structure_only
    deep = ROI_DATA + _pva(4)[len(LMDB):]
    with pytest.raises(ShapeError, match="join3"):
        summarize(deep, inputs={"data": (1, 3, 600, 1000), "im_info": (1, 3),
                                "gt_boxes": (1, 5)})
    inferred, notes = [], []
    with structure_only():           # as summary reads a file: the end-to-end tops (HAS_RPN)
        rows, _ = summarize(deep, inferred=inferred, notes=notes)
    h, w = rows[0].top_shapes[0][2:]
    assert h % 16 == 0 and w % 16 == 0 and inferred
    assert any("changes with every minibatch (its setup gives 1 x 3 x 600 x 1000)" in n
               for n in notes)
    notes = []
    with structure_only():
        rows, _ = summarize(ROI_DATA + _pva(3)[len(LMDB):], notes=notes)
    assert rows[0].top_shapes[0] == (1, 3, 600, 1000)
    assert any("replaced by an Input layer of those shapes" in n for n in notes)
