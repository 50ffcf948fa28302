"""A pycaffe-style script: the only caffepy-specific line is ``import caffepy as caffe``.

    python examples/pycaffe_script.py DEPLOY WEIGHTS IMAGE SOLVER [OUT_WEIGHTS]

Loads a classification net with its weights, preprocesses an image with caffe.io.Transformer,
classifies it, fine-tunes with the solver (its train net starts from WEIGHTS) for a few steps,
does net surgery on net.params (copies the fine-tuned weights into the deploy net and rescales
the last layer) and saves the result.
"""
import sys

import numpy as np

import caffepy as caffe


def main(deploy, weights, image, solver_file, out_weights=None):
    caffe.set_mode_cpu()
    net = caffe.Net(deploy, caffe.TEST, weights=weights)
    in_ = net.inputs[0]

    transformer = caffe.io.Transformer({in_: net.blobs[in_].data.shape})
    transformer.set_transpose(in_, (2, 0, 1))
    transformer.set_channel_swap(in_, (2, 1, 0))
    transformer.set_raw_scale(in_, 255)
    transformer.set_mean(in_, np.array([104.0, 117.0, 123.0]))

    img = caffe.io.load_image(image)
    net.blobs[in_].data[...] = transformer.preprocess(in_, img)
    prob = net.forward()[net.outputs[0]][0]
    print("before fine-tuning: class %d (p = %.3f)" % (prob.argmax(), prob.max()))

    solver = caffe.get_solver(solver_file)
    solver.net.copy_from(weights)
    solver.step(5)
    print("fine-tuned %d iterations, loss %.4f" % (solver.iter, float(solver.net.blobs["loss"].data)))

    for name, blobs in net.params.items():          # net surgery: take the fine-tuned weights
        for k, blob in enumerate(blobs):
            blob.data[...] = solver.net.params[name][k].data
    last = list(net.params)[-1]
    net.params[last][0].data[...] *= 2.0
    net.params[last][1].data[...] = 0

    prob = net.forward()[net.outputs[0]][0]
    print("after surgery: class %d (p = %.3f)" % (prob.argmax(), prob.max()))
    if out_weights:
        net.save(out_weights)
    return prob


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    main(*sys.argv[1:6])
