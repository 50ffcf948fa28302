"""Random but valid weights for a built net (tests and benchmarks of deploy nets without their
trained .caffemodel): He-scaled convolution / inner-product weights, small biases, BatchNorm
statistics with a positive variance and a nonzero scale factor, Scale around 1, Bias around 0."""
import numpy as np

WEIGHTED = ("Convolution", "InnerProduct", "ConvolutionDepthwise", "DepthwiseConvolution")


def randomize(net, seed=0):
    rng = np.random.default_rng(seed)
    for layer in net.layers:
        if layer.type in WEIGHTED:
            w = layer.blobs[0].data
            w[...] = rng.standard_normal(w.shape) * np.sqrt(2.0 / (w.size // w.shape[0]))
            for b in layer.blobs[1:]:
                b.data[...] = rng.standard_normal(b.shape) * 0.1
        elif layer.type == "BatchNorm":
            c = layer.blobs[0].count
            s = rng.uniform(0.5, 2.0)                     # the moving-average scale factor
            layer.blobs[0].data[...] = s * rng.standard_normal(c) * 0.2
            layer.blobs[1].data[...] = s * rng.uniform(0.5, 1.5, c)
            layer.blobs[2].data[...] = s
        elif layer.type == "Scale":
            layer.blobs[0].data[...] = rng.uniform(0.5, 1.5, layer.blobs[0].shape)
            for b in layer.blobs[1:]:
                b.data[...] = rng.standard_normal(b.shape) * 0.1
        elif layer.type == "Bias":
            for b in layer.blobs:
                b.data[...] = rng.standard_normal(b.shape) * 0.1


def logit_blobs(net):
    """Bottoms of the net's Softmax layers (the class scores)."""
    return [net._wiring[i][0][0] for i, layer in enumerate(net.layers)
            if layer.type == "Softmax"]


def calibrate(net, blobs, seed=9):
    """Scale the layers producing ``blobs`` so that these come out with std ~2 on a gaussian
    input: a saturated softmax would turn float32 rounding of huge logits into large relative
    errors of its output."""
    name = net.inputs[0]
    x = np.random.default_rng(seed).standard_normal(net.blobs[name].shape)
    out = net.forward(blobs=list(blobs), **{name: x})
    for blob in blobs:
        producer = [i for i in range(len(net.layers)) if blob in net._wiring[i][1]][0]
        layer = net.layers[producer]
        if layer.type in WEIGHTED:
            for b in layer.blobs:
                b.data[...] *= 2.0 / max(float(out[blob].std()), 1e-6)
