"""Inference latency: caffepy's forward vs onnxruntime on the exported model, models/ nets.

    python benchmarks/bench_onnx.py [--nets googlenet,resnet50,...] [--batches 1,8] [--runs 3]

Each net (random weights, float32) is built at each batch size, exported with caffepy.onnx
(checked: outputs within 1e-4), and timed back to back on the same inputs: one warm-up, then
the median of ``--runs`` forwards of caffepy and of an onnxruntime CPU session with
``--threads`` intra-op threads (default: the core count, as numpy's BLAS uses). Prints
/proc/loadavg before and after: on a shared machine quote the ratio, not the milliseconds.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODELS = ["caffenet", "googlenet", "resnet50", "mobilenet_v1", "squeezenet1_1", "vgg16"]


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().strip()
    except OSError:
        return "n/a"


def _median_ms(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times))


def bench(name, batch, runs, threads):
    import onnxruntime as ort
    from caffepy import onnx as caffe_onnx
    from caffepy import zoo
    from caffepy.net import Net
    from caffepy.onnx.export import random_inputs
    from caffepy.proto import caffe_pb2, io as proto_io
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    param = zoo.constant_fillers(proto_io.read_net(
        os.path.join(root, "models", name, "%s_deploy.prototxt" % name)))
    for lp in param.layer:
        if lp.type == "Input":
            lp.input_param.shape[0].dim[0] = batch
    net = Net(param, caffe_pb2.TEST)
    zoo.randomize_params(net, 0)
    model = caffe_onnx.to_model(net)
    err = max(caffe_onnx.compare(net, model).values())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    feeds = random_inputs(net, 1)
    for k, v in feeds.items():
        net.blobs[k].data[...] = v
    t_caffe = _median_ms(net.forward, runs)
    t_ort = _median_ms(lambda: sess.run(None, feeds), runs)
    return t_caffe, t_ort, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    print("loadavg before: %s" % _loadavg())
    print("| net | batch | caffepy forward (ms) | onnxruntime (ms) | caffepy / onnxruntime | "
          "max rel. error |")
    print("|---|---|---|---|---|---|")
    for name in a.nets.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            t_c, t_o, err = bench(name, batch, a.runs, a.threads)
            print("| %s | %d | %.1f | %.1f | %.1fx | %.1e |" % (name, batch, t_c, t_o, t_c / t_o, err))
            sys.stdout.flush()
    print("loadavg after: %s" % _loadavg())


if __name__ == "__main__":
    main()
