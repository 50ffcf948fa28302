"""The input-size search takes the sizes that the net files beside a file declare (a training
file's deploy file): ``caffepy.zoo.candidates.family_sizes`` and its place in the search."""
import os

from caffepy.zoo.candidates import FAMILY_FILES, family_sizes
from caffepy.zoo.summary import summarize

LMDB = ('layer { name: "data" type: "Data" top: "data" top: "label" '
        'data_param { source: "x" batch_size: 1 } }\n')
# an OCR-like net: the width must come to 19 steps after a stride-8 stage, the height to 1
NET = LMDB + (
    'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
    'convolution_param { num_output: 4 kernel_size: 8 stride: 8 } }\n'
    'layer { name: "squash" type: "Pooling" bottom: "conv" top: "squash" '
    'pooling_param { pool: MAX kernel_h: 7 kernel_w: 1 stride: 1 } }\n'
    'layer { name: "steps" type: "Input" top: "steps" '
    'input_param { shape { dim: 1 dim: 4 dim: 1 dim: 19 } } }\n'
    'layer { name: "sum" type: "Eltwise" bottom: "squash" bottom: "steps" top: "sum" }\n')


def _write(folder, name, text):
    path = os.path.join(str(folder), name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_sizes_from_the_files_beside_it_deploy_first(tmp_path):
    own = _write(tmp_path, "train_val.prototxt", NET)
    _write(tmp_path, "a_solver.prototxt", "base_lr: 0.1\n")
    _write(tmp_path, "b_net.prototxt", 'layer { name: "d" type: "Data" top: "d" transform_param '
                                       '{ crop_size: 227 } }\n# crop_size: 99\n')
    _write(tmp_path, "deploy.prototxt", 'input: "data"\ninput_dim: 1\ninput_dim: 3\n'
                                        'input_dim: 56\ninput_dim: 152\n'
                                        'layer { name: "x" type: "Input" top: "x" input_param { '
                                        'shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }\n')
    _write(tmp_path, "old.pt", 'input_shape { dim: 10 dim: 3 dim: 32 dim: 48 }\n')
    _write(tmp_path, "notes.txt", 'input_dim: 1 input_dim: 3 input_dim: 64 input_dim: 64\n')
    os.mkdir(str(tmp_path / "dir.prototxt"))
    found = family_sizes(own)
    assert [(h, w) for h, w, _ in found] == [(56, 152), (227, 227), (32, 48)]
    assert found[0][2] == "the input size deploy.prototxt beside it declares"
    assert family_sizes(None) == [] and family_sizes(str(tmp_path / "gone" / "x.prototxt")) == []


def test_at_most_so_many_files_and_none_too_long(tmp_path):
    own = _write(tmp_path, "net.prototxt", NET)
    for i in range(FAMILY_FILES + 4):
        _write(tmp_path, "n%02d.prototxt" % i, 'input_shape { dim: 1 dim: 3 dim: %d dim: 40 }\n'
               % (100 + i))
    assert len(family_sizes(own)) == FAMILY_FILES


def test_a_training_file_builds_at_the_size_its_deploy_file_declares(tmp_path):
    own = _write(tmp_path, "train.prototxt", NET)
    inferred = []
    try:                                # alone, no searched size gives 19 steps and height 1
        summarize(own, inferred=inferred)
        alone = inferred[0]
    except Exception as e:             # noqa: BLE001 -- either way it is not the deploy size
        alone = str(e)
    assert "56 x 152" not in alone
    _write(tmp_path, "deploy.prototxt", 'input: "data" input_shape { dim: 1 dim: 3 dim: 56 '
                                        'dim: 152 }\n')
    inferred = []
    rows, _ = summarize(own, inferred=inferred)
    assert "data = 1 x 3 x 56 x 152" in inferred[0]
    assert "the input size deploy.prototxt beside it declares" in inferred[0]
    assert [r for r in rows if r.name == "sum"][0].top_shapes == [(1, 4, 1, 19)]
