"""Layer cases shared by the emulated tests (no GPU) and the real-GPU tests, and the harness that
runs a layer on the CPU path and on the GPU path and compares tops, bottom diffs and param diffs.
"""
import numpy as np

from caffepy import common
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer
from caffepy.testing.gradient_check import GradientChecker

TRAIN, TEST = caffe_pb2.TRAIN, caffe_pb2.TEST


def _x(*shape, lo=None, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape)
    return np.abs(x) + 0.1 if lo == "pos" else x


def _labels(n, classes, seed=1, shape=None):
    r = np.random.default_rng(seed)
    return r.integers(0, classes, size=shape or (n,)).astype(np.float64)


# id -> (prototxt, bottoms, phase, options). options: grad (run the gradient check), kink,
# check_bottom, in_place
CASES = {
    "relu": ('type: "ReLU"', [_x(2, 3, 4, 5)], TEST, {"kink": 1e-2}),
    "relu_leaky_inplace": ('type: "ReLU" relu_param { negative_slope: 0.1 }', [_x(2, 3, 4)], TEST,
                           {"in_place": True, "kink": 1e-2, "grad": False}),
    "sigmoid": ('type: "Sigmoid"', [_x(2, 3, 4)], TEST, {}),
    "tanh_inplace": ('type: "TanH"', [_x(2, 3, 4)], TEST, {"in_place": True, "grad": False}),
    "absval": ('type: "AbsVal"', [_x(2, 3, 4)], TEST, {"kink": 1e-2}),
    "bnll": ('type: "BNLL"', [_x(2, 3, 4)], TEST, {}),
    "elu_inplace": ('type: "ELU" elu_param { alpha: 0.5 }', [_x(2, 3, 4)], TEST,
                    {"in_place": True, "kink": 1e-2, "grad": False}),
    "swish": ('type: "Swish" swish_param { beta: 1.5 }', [_x(2, 3, 4)], TEST, {}),
    "relu6": ('type: "ReLU6"', [_x(2, 3, 4) * 5], TEST, {"grad": False}),
    "clip": ('type: "Clip" clip_param { min: -0.5 max: 0.6 }', [_x(2, 3, 4)], TEST, {"grad": False}),
    "power": ('type: "Power" power_param { power: 2 scale: 0.5 shift: 3 }', [_x(2, 3, 4)], TEST, {}),
    "exp": ('type: "Exp" exp_param { base: 2 scale: 0.5 shift: 0.1 }', [_x(2, 3, 4)], TEST, {}),
    "log": ('type: "Log" log_param { scale: 0.5 shift: 3 }', [_x(2, 3, 4)], TEST, {}),
    "prelu": ('type: "PReLU"', [_x(2, 3, 4, 2)], TEST, {"kink": 1e-2}),
    "prelu_shared": ('type: "PReLU" prelu_param { channel_shared: true }', [_x(2, 3, 4)], TEST,
                     {"kink": 1e-2}),
    "dropout_test": ('type: "Dropout" dropout_param { dropout_ratio: 0.3 }', [_x(2, 3, 4)], TEST,
                     {}),
    "conv": ('type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 '
             'weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "gaussian" } }',
             [_x(2, 3, 7, 6)], TEST, {}),
    "conv_group_dilated": ('type: "Convolution" convolution_param { num_output: 4 group: 2 '
                           'kernel_h: 3 kernel_w: 2 dilation: 2 pad_h: 2 pad_w: 1 stride_h: 1 stride_w: 2 '
                           'weight_filler { type: "gaussian" std: 0.3 } }', [_x(3, 4, 8, 7)],
                           TEST, {}),
    "conv_engine_caffe": ('type: "Convolution" convolution_param { num_output: 2 kernel_size: 3 '
                          'engine: CAFFE weight_filler { type: "gaussian" std: 0.3 } }',
                          [_x(2, 2, 5, 5)], TEST, {}),
    "conv_1x1_two_bottoms": ('type: "Convolution" convolution_param { num_output: 3 kernel_size: 1'
                             ' weight_filler { type: "gaussian" std: 0.3 } }',
                             [_x(2, 5, 3, 3), _x(2, 5, 3, 3, seed=5)], TEST, {"tops": 2}),
    # the kernel overhangs the padded input by less than the stride: Caffe's truncating
    # division gives one output row / column, whose outside taps read zeros
    "conv_overhang": ('type: "Convolution" convolution_param { num_output: 3 kernel_h: 3 '
                      'kernel_w: 4 stride: 2 pad_w: 1 weight_filler { type: "gaussian" std: 0.3 } '
                      'bias_filler { type: "gaussian" } }', [_x(2, 2, 2, 5)], TEST, {}),
    "scale_bias": ('type: "Scale" scale_param { bias_term: true filler { type: "gaussian" } '
                   'bias_filler { type: "gaussian" } }', [_x(2, 3, 4, 5)], TEST, {}),
    "scale_two_axes": ('type: "Scale" scale_param { axis: 1 num_axes: 2 filler { type: "gaussian" '
                       '} }', [_x(2, 3, 4, 2)], TEST, {}),
    "scale_two_bottoms": ('type: "Scale" scale_param { axis: 0 }', [_x(2, 3, 4), _x(2, 3, seed=3)],
                          TEST, {}),
    "scale_inplace": ('type: "Scale" scale_param { bias_term: true filler { type: "gaussian" } }',
                      [_x(2, 3, 4)], TEST, {"in_place": True, "grad": False}),
    "bias": ('type: "Bias" bias_param { filler { type: "gaussian" } }', [_x(2, 3, 4, 5)], TEST, {}),
    "bias_two_bottoms": ('type: "Bias" bias_param { axis: 1 }', [_x(2, 3, 4), _x(3, 4, seed=3)], TEST, {}),
    "inner_product": ('type: "InnerProduct" inner_product_param { num_output: 5 weight_filler { '
                      'type: "gaussian" std: 0.3 } bias_filler { type: "gaussian" } }',
                      [_x(3, 2, 2, 3)], TEST, {}),
    "inner_product_transpose": ('type: "InnerProduct" inner_product_param { num_output: 4 '
                                'transpose: true weight_filler { type: "gaussian" std: 0.3 } }',
                                [_x(3, 6)], TEST, {}),
    "pool_max": ('type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }',
                 [_x(2, 3, 7, 6)], TEST, {"tops": 2}),
    "pool_max_pad": ('type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }',
                     [_x(2, 2, 6, 5)], TEST, {}),
    "pool_ave_pad": ('type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }',
                     [_x(2, 3, 7, 6)], TEST, {}),
    "pool_overhang": ('type: "Pooling" pooling_param { pool: AVE kernel_h: 3 kernel_w: 4 '
                      'stride_h: 2 stride_w: 3 pad_h: 0 pad_w: 1 }', [_x(2, 3, 2, 3)], TEST, {}),
    "pool_max_overhang": ('type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }',
                          [_x(2, 3, 2, 2)], TEST, {"tops": 2}),
    "pool_global_ave": ('type: "Pooling" pooling_param { pool: AVE global_pooling: true }',
                        [_x(2, 3, 5, 4)], TEST, {}),
    "pool_sto_test": ('type: "Pooling" pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }',
                      [_x(2, 3, 7, 6, lo="pos")], TEST, {}),
    "lrn": ('type: "LRN" lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 k: 2 }', [_x(2, 7, 3, 3)],
            TEST, {}),
    "softmax": ('type: "Softmax"', [_x(2, 5, 3)], TEST, {}),
    "softmax_axis2": ('type: "Softmax" softmax_param { axis: 2 }', [_x(2, 3, 4, 2)], TEST, {}),
    "softmax_loss": ('type: "SoftmaxWithLoss"', [_x(4, 5), _labels(4, 5)], TEST,
                     {"check_bottom": [0]}),
    "softmax_loss_ignore_2tops": ('type: "SoftmaxWithLoss" loss_param { ignore_label: 2 '
                                  'normalization: FULL }', [_x(2, 4, 3), _labels(2, 4, shape=(2, 3))],
                                  TEST, {"check_bottom": [0], "tops": 2, "grad": False}),
    "euclidean": ('type: "EuclideanLoss"', [_x(3, 4), _x(3, 4, seed=3)], TEST, {}),
    "sigmoid_ce": ('type: "SigmoidCrossEntropyLoss" loss_param { ignore_label: -1 }',
                   [_x(3, 4), np.where(_x(3, 4, seed=4) > 1, -1, (_x(3, 4, seed=5) > 0) * 1.0)],
                   TEST, {"check_bottom": [0]}),
    "batchnorm_train": ('type: "BatchNorm"', [_x(3, 2, 2, 3)], TRAIN, {}),
    "batchnorm_global": ('type: "BatchNorm" batch_norm_param { use_global_stats: true }',
                         [_x(3, 2, 2, 3)], TEST, {"set_stats": True}),
    "concat": ('type: "Concat" concat_param { axis: 1 }', [_x(2, 2, 3), _x(2, 3, 3, seed=2)], TEST,
               {}),
    "slice": ('type: "Slice" slice_param { axis: 2 slice_point: 1 slice_point: 3 }', [_x(2, 3, 5)],
              TEST, {"tops": 3}),
    "split": ('type: "Split"', [_x(2, 3)], TEST, {"tops": 2}),
    "eltwise_sum": ('type: "Eltwise" eltwise_param { operation: SUM coeff: 0.5 coeff: -2 coeff: 1 }',
                    [_x(2, 3), _x(2, 3, seed=2), _x(2, 3, seed=3)], TEST, {}),
    "eltwise_prod": ('type: "Eltwise" eltwise_param { operation: PROD }',
                     [_x(2, 3), _x(2, 3, seed=2), _x(2, 3, seed=3)], TEST, {}),
    "eltwise_max": ('type: "Eltwise" eltwise_param { operation: MAX }',
                    [_x(2, 3), _x(2, 3, seed=2), _x(2, 3, seed=3)], TEST, {"grad": False}),
}


def build(case, dtype):
    text, inputs, phase, opts = CASES[case]
    layer = make_layer(text, dtype=dtype, phase=phase)
    bottom = make_blobs(inputs, dtype=dtype)
    top = bottom[:1] if opts.get("in_place") else make_blobs(opts.get("tops", 1), dtype=dtype)
    return layer, bottom, top, opts


def _set_stats(layer):
    c = layer.blobs[0].count
    layer.blobs[0].data[...] = np.linspace(-1, 1, c)
    layer.blobs[1].data[...] = np.linspace(0.5, 2, c)
    layer.blobs[2].data[...] = 1.5


def run(case, dtype, gpu_mode):
    """Setup, forward, backward (top diffs fixed) in one mode: returns arrays to compare."""
    (common.set_mode_gpu if gpu_mode else common.set_mode_cpu)()
    try:
        common.set_random_seed(7)
        layer, bottom, top, opts = build(case, dtype)
        layer.setup(bottom, top)
        if opts.get("set_stats"):
            _set_stats(layer)
        layer.forward(bottom, top)
        tops = [t.data.copy() for t in top]
        r = np.random.default_rng(11)
        for i, t in enumerate(top):
            if not layer.loss(i):
                t.diff[...] = r.standard_normal(t.shape)
        for p in layer.blobs:
            p.diff[...] = 0.25
        check = opts.get("check_bottom", list(range(len(bottom))))
        layer.backward(top, [i in check for i in range(len(bottom))], bottom)
        diffs = [bottom[i].diff.copy() for i in check] if not opts.get("in_place") else \
            [bottom[0].diff.copy()]
        params = [p.diff.copy() for p in layer.blobs]
        datas = [p.data.copy() for p in layer.blobs]
        return {"top": tops, "bottom_diff": diffs, "param_diff": params, "param_data": datas}
    finally:
        common.set_mode_cpu()


def compare(case, dtype, rtol, atol):
    cpu = run(case, dtype, False)
    dev = run(case, dtype, True)
    for key in cpu:
        for i, (a, b) in enumerate(zip(cpu[key], dev[key])):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol,
                                       err_msg="%s: %s[%d] GPU vs CPU" % (case, key, i))


class DeviceGradientChecker(GradientChecker):
    """The gradient checker writes inputs through array views it holds; mark the blobs
    host-modified before every forward so that the device copies follow."""

    def _objective(self, layer, bottom, top, weights):
        for b in list(bottom) + list(layer.blobs):
            b.data  # noqa: B018  (the getter moves the head to the host)
        return GradientChecker._objective(self, layer, bottom, top, weights)


def gradient_check(case):
    common.set_mode_gpu()
    try:
        layer, bottom, top, opts = build(case, np.float64)
        kink = opts.get("kink")
        checker = DeviceGradientChecker(stepsize=1e-3, threshold=1e-3,
                                        kink_range=kink if kink else -1.0)
        common.set_random_seed(checker.seed)
        layer.setup(bottom, top)
        if opts.get("set_stats"):
            _set_stats(layer)
        checker.check(layer, bottom, top, check_bottom=opts.get("check_bottom"),
                      first_setup=False)
    finally:
        common.set_mode_cpu()
