from caffepy import zoo
from caffepy.proto import io as proto_io
from caffepy.zoo.input_search import set_input_shapes

TRAIN_VAL = """
layer { name: "data" type: "HDF5Data" top: "input" top: "match"
        hdf5_data_param { source: "train.txt" batch_size: 2 } include { phase: TRAIN } }
layer { name: "data" type: "HDF5Data" top: "input" top: "match"
        hdf5_data_param { source: "test.txt" batch_size: 2 } include { phase: TEST } }
"""


def test_an_input_shape_is_given_to_the_readers_of_every_phase():
    param = zoo.replace_data_layers(proto_io.read_net(TRAIN_VAL))
    assert set_input_shapes(param, {"match": (2, 10, 64, 64), "nothing": (1,)}) == ["nothing"]
    assert [list(lp.input_param.shape[1].dim) for lp in param.layer] == [[2, 10, 64, 64]] * 2
