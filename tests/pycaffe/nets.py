"""Small nets shared by the pycaffe tests (the shapes of pycaffe's own test nets)."""
import os


def simple_net_text(num_output=13):
    """pycaffe's test net: DummyData -> Convolution -> InnerProduct -> SoftmaxWithLoss."""
    return """name: 'testnet' force_backward: true
    layer { type: 'DummyData' name: 'data' top: 'data' top: 'label'
      dummy_data_param { num: 5 channels: 2 height: 3 width: 4
        num: 5 channels: 1 height: 1 width: 1
        data_filler { type: 'gaussian' std: 1 }
        data_filler { type: 'constant' } } }
    layer { type: 'Convolution' name: 'conv' bottom: 'data' top: 'conv'
      convolution_param { num_output: 11 kernel_size: 2 pad: 3
        weight_filler { type: 'gaussian' std: 1 }
        bias_filler { type: 'constant' value: 2 } }
        param { decay_mult: 1 } param { decay_mult: 0 } }
    layer { type: 'InnerProduct' name: 'ip' bottom: 'conv' top: 'ip_blob'
      inner_product_param { num_output: %d
        weight_filler { type: 'gaussian' std: 2.5 }
        bias_filler { type: 'constant' value: -3 } } }
    layer { type: 'SoftmaxWithLoss' name: 'loss' bottom: 'ip_blob' bottom: 'label'
      top: 'loss' }""" % num_output


def write(tmp_path, name, text):
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as f:
        f.write(text)
    return path


DEPLOY = """name: 'deploy'
layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
  convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'conv' top: 'ip'
  inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'prob' type: 'Softmax' bottom: 'ip' top: 'prob' }
"""
