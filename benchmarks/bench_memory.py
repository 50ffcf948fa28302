"""Peak resident memory of a CaffeNet training step and a ResNet-50 forward.

    python benchmarks/bench_memory.py [--runs caffenet_train,resnet50_exact,resnet50_optimize]

Each run is a fresh subprocess (``OPENBLAS_NUM_THREADS=1``) whose ``ru_maxrss`` is printed in MB:

- ``caffenet_train``: CaffeNet batch 16 (the net of ``bench_cpu.py``: DummyData + SoftmaxWithLoss),
  two forward + backward steps;
- ``resnet50_exact`` / ``resnet50_optimize``: models/resnet50's deploy net at batch 1, random
  weights, two forwards on the exact path / in optimize mode (its default engine;
  ``CAFFEPY_INFER_ENGINE=caffepy|onnxruntime|openvino`` picks one; the line names it).

The numba kernels are on unless ``CAFFEPY_NUMBA=0`` is set in the environment (the child inherits
it). ``--child RUN`` is the subprocess entry point.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = ("caffenet_train", "resnet50_exact", "resnet50_optimize")


def child(run):
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import numpy as np
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    if run == "caffenet_train":
        import cpu_nets
        net = cpu_nets.build_caffepy("caffenet")
        for _ in range(2):
            net.clear_param_diffs()
            net.forward_backward()
    else:
        import bench_infer
        from caffepy.testing.random_weights import randomize
        with tempfile.TemporaryDirectory() as tmp:
            proto = bench_infer._with_batch(bench_infer._load("resnet50"), 1,
                                            os.path.join(tmp, "r50.prototxt"))
            net = Net(proto, caffe_pb2.TEST)
            randomize(net)
            if run == "resnet50_optimize":
                weights = os.path.join(tmp, "r50.caffemodel")
                net.save(weights)
                del net
                net = Net(proto, caffe_pb2.TEST, weights=weights, optimize=True)
            x = np.random.default_rng(1).standard_normal(
                net.blobs[net.inputs[0]].shape).astype(np.float32)
            for _ in range(2):
                net.forward(**{net.inputs[0]: x})
            if net._plan is not None:
                print("engine %s" % net._plan.engine)
    print("%.1f" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--child", choices=RUNS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    numba = os.environ.get("CAFFEPY_NUMBA", "1")
    for run in args.runs.split(","):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", run],
                             env=env, capture_output=True, text=True, check=True)
        lines = out.stdout.split()
        print("%-18s CAFFEPY_NUMBA=%s  peak RSS %s MB%s" % (
            run, numba, lines[-1], "  (%s)" % " ".join(lines[:-1]) if lines[:-1] else ""),
            flush=True)


if __name__ == "__main__":
    main()
