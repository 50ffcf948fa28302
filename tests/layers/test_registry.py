"""The registry's look-up of one type imports only the modules the type index names for it; a
type the index does not know, or an index older than the code, falls back to importing every
family; variants keep load_all's order whatever order the look-ups imported their modules in; the
CAFFEPY_LAYERS plug-ins load on that path too. Each case runs in a fresh interpreter (this one
has every family imported already)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LENET = """
name: "LeNet"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: 1 dim: 28 dim: 28 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 4 kernel_size: 5 } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
        inner_product_param { num_output: 10 } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "prob" type: "Softmax" bottom: "ip1" top: "prob" }
"""


def _run(code, env=None):
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full.pop("CAFFEPY_LAYERS", None)
    full.update(env or {})
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=full, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_building_lenet_imports_only_its_layer_modules():
    out = _run("""
        import sys
        import caffepy
        from caffepy.proto import caffe_pb2, io
        from caffepy.layers import registry
        net = caffepy.Net(io.parse_text(%r, caffe_pb2.NetParameter()), caffepy.TEST)
        assert net.blobs["prob"].data.shape == (1, 10)
        assert not registry._loaded[0], "every family was imported"
        forks = sorted(m for m in sys.modules if m.startswith("caffepy.forks."))
        print(len(forks), forks[:5])
        print(type(net.layers[1]).__module__)
    """ % LENET)
    count, module = out.split("\n")[0], out.split("\n")[1]
    # the fork modules that register variants of Convolution, Pooling, InnerProduct, ... only
    assert int(count.split()[0]) < 20, out
    assert module == "caffepy.layers.conv"


def test_index_lists_every_type_and_variant_order_is_load_alls():
    _run("""
        from caffepy.layers import registry
        from caffepy.layers._type_index import TYPES
        # look up types whose modules also register variants of others, most of them first
        for t in ["Data", "BN", "SoftmaxWithLoss", "Upsample", "Pooling", "InnerProduct",
                  "DetectionOutput", "Convolution", "SmoothL1Loss", "Deconvolution", "SPP"]:
            registry.get_layer_class(t)
        assert not registry._loaded[0]
        lazy = {t: [c for _, c in v] for t, v in registry._VARIANTS.items()}
        registry.load_all()
        assert set(TYPES) == set(registry._REGISTRY), set(registry._REGISTRY) ^ set(TYPES)
        for t, classes in lazy.items():
            assert classes == [c for _, c in registry._VARIANTS[t]], t
            order = [registry._VARIANT_MODULES[c] for c in classes]
            assert order == sorted(order, key=TYPES[t].index), (t, order)
    """)


def test_stale_index_and_unknown_type_fall_back_to_every_family():
    _run("""
        from caffepy.errors import NetError
        from caffepy.layers import registry
        registry._index[:] = [{"Convolution": ("caffepy.layers.neuron",)}]   # wrong module
        assert registry.get_layer_class("Convolution").__module__ == "caffepy.layers.conv"
        assert registry._loaded[0]
    """)
    _run("""
        from caffepy.errors import NetError
        from caffepy.layers import registry
        try:
            registry.get_layer_class("Convolutoin", "c1")
        except NetError as e:
            assert "did you mean 'Convolution'" in str(e), e
        else:
            raise AssertionError("no error")
        assert registry._loaded[0]
    """)


def test_caffepy_layers_plugin_loads_on_the_lazy_path(tmp_path):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(textwrap.dedent("""
        import caffepy

        @caffepy.register_layer("MyDouble")
        class MyDouble(caffepy.LayerBase):
            exact_num_bottom_blobs = 1
            exact_num_top_blobs = 1

            def reshape(self, bottom, top):
                top[0].reshape(bottom[0].shape)

            def forward_cpu(self, bottom, top):
                top[0].data[...] = 2 * bottom[0].data
    """))
    out = _run("""
        import numpy as np
        import caffepy
        from caffepy.proto import caffe_pb2, io
        text = 'layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 } } } ' \\
               'layer { name: "d" type: "MyDouble" bottom: "x" top: "y" }'
        net = caffepy.Net(io.parse_text(text, caffe_pb2.NetParameter()), caffepy.TEST)
        net.blobs["x"].data[...] = [1, 2]
        net.forward()
        print(net.blobs["y"].data.tolist())
    """, env={"CAFFEPY_LAYERS": str(plugin)})
    assert out.strip() == "[2.0, 4.0]"
