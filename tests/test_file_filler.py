import numpy as np
import pytest
from google.protobuf import text_format

from caffepy import zoo
from caffepy.blob import Blob
from caffepy.errors import CaffeError
from caffepy.fillers import get_filler
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io


def filled(path, shape):
    fp = caffe_pb2.FillerParameter()
    text_format.Parse('type: "file" file: "%s"' % path, fp)
    blob = Blob(shape, dtype=np.float32)
    get_filler(fp).fill(blob)
    return blob.data


def test_file_filler_reads_numbers_in_blob_order(tmp_path):
    p = tmp_path / "theta.txt"
    p.write_text("1 0 0\n0 1 0.5\n")
    np.testing.assert_array_equal(filled(p, (2, 3)), [[1, 0, 0], [0, 1, 0.5]])
    np.testing.assert_array_equal(filled(p, (6,)), [1, 0, 0, 0, 1, 0.5])


def test_file_filler_keeps_the_stream_semantics(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("3 4")
    np.testing.assert_array_equal(filled(short, (4,)), [3, 4, 4, 4])     # last value repeated
    bad = tmp_path / "bad.txt"
    bad.write_text("2 x 5")
    np.testing.assert_array_equal(filled(bad, (4,)), [2, 0, 0, 0])       # a non-number: 0 on


def test_file_filler_missing_or_empty_file_is_an_error(tmp_path):
    with pytest.raises(CaffeError, match="cannot read '.*nowhere.txt'"):
        filled(tmp_path / "nowhere.txt", (2,))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(CaffeError, match="empty.txt' holds no number"):
        filled(empty, (2,))


NET = '''
name: "st_init"
input: "data" input_shape { dim: 2 dim: 4 }
layer { name: "theta" type: "InnerProduct" bottom: "data" top: "theta"
  inner_product_param { num_output: 6 weight_filler { type: "constant" }
                        bias_filler { type: "file" file: "%s" } } }
'''


def test_file_filler_in_a_net(tmp_path):
    p = tmp_path / "bias_init.txt"
    p.write_text("1 0 0 0 1 0")
    net = Net(proto_io.read_net(NET % p), caffe_pb2.TEST)
    net.blobs["data"].data[...] = np.arange(8).reshape(2, 4)
    net.forward()
    np.testing.assert_array_equal(net.blobs["theta"].data, [[1, 0, 0, 0, 1, 0]] * 2)
    with pytest.raises(CaffeError) as e:
        Net(proto_io.read_net(NET % (tmp_path / "gone.txt")), caffe_pb2.TEST)
    message = str(e.value)
    assert "\n" not in message and "layer 'theta'" in message and "gone.txt" in message
    # the census forward replaces every filler by a constant one (the fork leaves the values of
    # a missing file uninitialised): the net builds with a zero bias
    net = Net(zoo.constant_fillers(proto_io.read_net(NET % (tmp_path / "gone.txt"))),
              caffe_pb2.TEST)
    assert not net.params["theta"][1].data.any()
