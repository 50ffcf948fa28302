"""FlowNet 2's .flo / .float3 files and the FLOWriter / FloatWriter / FloatReader layers."""
import struct

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.flownet.files import read_flo, read_float3, write_flo, write_float3
from caffepy.testing import make_blobs, make_layer, run_layer

RNG = np.random.default_rng(17)


def test_flo_round_trip_and_layout(tmp_path):
    flow = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    write_flo(tmp_path / "a.flo", flow)
    raw = (tmp_path / "a.flo").read_bytes()
    assert raw[:4] == b"PIEH" and struct.unpack("<ii", raw[4:12]) == (4, 3)
    assert struct.unpack("<ff", raw[12:20]) == (flow[0, 0, 0], flow[1, 0, 0])  # u, v interleaved
    np.testing.assert_array_equal(read_flo(tmp_path / "a.flo"), flow)
    (tmp_path / "bad.flo").write_bytes(raw[:-4])
    with pytest.raises(CaffeError, match="needs 108 bytes"):
        read_flo(tmp_path / "bad.flo")


def test_float3_round_trip_and_reader_layer(tmp_path):
    data = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    write_float3(tmp_path / "a.float3", data)
    assert (tmp_path / "a.float3").read_bytes().startswith(b"float\n3\n4\n3\n2\n")
    np.testing.assert_array_equal(read_float3(tmp_path / "a.float3"), data)
    (y,) = run_layer(make_layer('type: "FloatReader" reader_param { file: "%s" num: 2 }'
                                % (tmp_path / "a.float3")), [], make_blobs(1))
    np.testing.assert_array_equal(y, np.stack([data, data]))
    (tmp_path / "bad.float3").write_bytes(b"floot\n3\n")
    with pytest.raises(CaffeError, match="not a float file"):
        read_float3(tmp_path / "bad.float3")


def test_writer_layers_name_files_by_iteration_and_item(tmp_path):
    flow = RNG.standard_normal((2, 2, 3, 3))
    layer = make_layer('type: "FLOWriter" writer_param { folder: "%s" prefix: "f-" suffix: "-x" }'
                       % (tmp_path / "out"))
    bottom = make_blobs([flow])
    layer.setup(bottom, [])
    layer.forward(bottom, [])
    layer.forward(bottom, [])
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["f-0000000(000)-x.flo", "f-0000000(001)-x.flo", "f-0000001(000)-x.flo",
                     "f-0000001(001)-x.flo"]
    np.testing.assert_allclose(read_flo(tmp_path / "out" / names[1]), flow[1], rtol=1e-6)
    w = make_layer('type: "FloatWriter" writer_param { file: "%s" }' % (tmp_path / "one.float3"))
    w.setup(make_blobs([flow[:1]]), [])
    w.forward(make_blobs([flow[:1]]), [])
    np.testing.assert_allclose(read_float3(tmp_path / "one.float3"), flow[0], rtol=1e-6)


def test_img_reader(tmp_path):
    from caffepy.data.image import encode_image
    img = RNG.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    (tmp_path / "a.png").write_bytes(encode_image(img, "png"))
    (y,) = run_layer(make_layer('type: "ImgReader" reader_param { file: "%s" num: 2 } '
                                'transform_param { scale: 0.5 mean_value: 10 }'
                                % (tmp_path / "a.png")), [], make_blobs(1))
    assert y.shape == (2, 3, 4, 5)
    np.testing.assert_allclose(y[1], (img.transpose(2, 0, 1) - 10.0) * 0.5)
