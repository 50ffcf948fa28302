import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_multi_proto_gives_out_its_prototypes():
    text = ('type: "MultiProto" top: "protos" multi_proto_param { num_protos: 3 num_output: 4 '
            'weight_filler { type: "gaussian" std: 1 } }')
    layer = make_layer(text)
    y, = run_layer(layer, [], make_blobs(1))
    assert y.shape == (3, 4)
    np.testing.assert_array_equal(y, layer.blobs[0].data)
    check_layer_gradient(make_layer(text), [], make_blobs(1))


def test_multi_proto_reads_the_first_listed_hdf5_file(tmp_path):
    h5py = pytest.importorskip("h5py")
    data = np.arange(10.0).reshape(2, 5)
    with h5py.File(tmp_path / "p.h5", "w") as f:
        f["protos"] = data
    (tmp_path / "list.txt").write_text("%s\n" % (tmp_path / "p.h5"))
    text = ('type: "MultiProto" top: "protos" multi_proto_param { num_protos: 3 num_output: 4 '
            'source: "%s" }' % (tmp_path / "list.txt"))
    y, = run_layer(make_layer(text), [], make_blobs(1))
    np.testing.assert_array_equal(y, data)
