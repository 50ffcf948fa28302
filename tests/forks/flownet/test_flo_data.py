"""segaware's FloData: .flo files named by the words of a list file."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.flownet.files import write_flo
from caffepy.testing import make_blobs, make_layer

TEXT = ('type: "FloData" top: "flow" image_data_param { source: "%s/list.txt" '
        'root_folder: "%s/" batch_size: 3 }')


def test_flo_data_reads_every_word_as_a_file(tmp_path):
    rng = np.random.default_rng(6)
    flows = [rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(2)]
    write_flo(tmp_path / "a.flo", flows[0])
    write_flo(tmp_path / "b.flo", flows[1])
    (tmp_path / "list.txt").write_text("a.flo b.flo\n")
    layer, top = make_layer(TEXT % (tmp_path, tmp_path)), make_blobs(1)
    layer.setup([], top)
    layer.forward([], top)
    assert top[0].shape == (3, 2, 3, 4)
    for n, k in enumerate((0, 1, 0)):
        np.testing.assert_array_equal(top[0].data[n], flows[k])
    layer.close()


def test_flo_data_bad_file_is_one_line(tmp_path):
    (tmp_path / "a.flo").write_bytes(b"PIEH\x04\0\0\0\x03\0\0\0" + b"\0" * 8)
    (tmp_path / "list.txt").write_text("a.flo\n")
    with pytest.raises(CaffeError, match="needs 108 bytes") as e:
        make_layer(TEXT % (tmp_path, tmp_path)).setup([], make_blobs(1))
    assert "\n" not in str(e.value)
