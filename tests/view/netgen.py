"""Nets for the view tests: a deep residual net written as text, and a net with hostile names."""

HOSTILE = ["</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>",
           "\u2028\"'&amp;<!--", "<svg onload=alert(1)>"]


def _conv(name, bottom, top, n, k=1, s=1, p=0):
    return ('layer { name: "%s" type: "Convolution" bottom: "%s" top: "%s" convolution_param { '
            'num_output: %d kernel_size: %d stride: %d pad: %d bias_term: false } }\n'
            % (name, bottom, top, n, k, s, p))


def _bn(unit, branch, top):
    return ('layer { name: "bn%s_%s" type: "BatchNorm" bottom: "%s" top: "%s" }\n'
            'layer { name: "scale%s_%s" type: "Scale" bottom: "%s" top: "%s" scale_param { bias_term: true } }\n'
            % (unit, branch, top, top, unit, branch, top, top))


def deep_resnet(units_per_stage=(3, 8, 58, 8), width=8, size=32):
    """A ResNet-152-like bottleneck net (Caffe's layer names: res2a_branch2a, bn2a_branch2a, ...),
    narrow and small so that it builds in a second; (3, 8, 58, 8) gives 1,021 layers."""
    out = ['name: "deep_resnet"\n',
           'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 '
           'dim: %d dim: %d } } }\n' % (size, size),
           _conv("conv1", "data", "conv1", width, 3, 1, 1), _bn("_conv1", "x", "conv1"),
           'layer { name: "conv1_relu" type: "ReLU" bottom: "conv1" top: "conv1" }\n']
    prev, c = "conv1", width
    for stage, units in enumerate(units_per_stage, start=2):
        for u in range(units):
            unit = "%d%s" % (stage, "a" if u == 0 else "b%d" % u)
            res = "res" + unit
            if u == 0:
                out.append(_conv(res + "_branch1", prev, res + "_branch1", 4 * c))
                out.append(_bn(unit, "branch1", res + "_branch1"))
                short = res + "_branch1"
            else:
                short = prev
            x = prev
            for part, (n, k, p) in zip("abc", ((c, 1, 0), (c, 3, 1), (4 * c, 1, 0))):
                top = "%s_branch2%s" % (res, part)
                out.append(_conv(top, x, top, n, k, 1, p))
                out.append(_bn(unit, "branch2" + part, top))
                if part != "c":
                    out.append('layer { name: "%s_relu" type: "ReLU" bottom: "%s" top: "%s" }\n'
                               % (top, top, top))
                x = top
            out.append('layer { name: "%s" type: "Eltwise" bottom: "%s" bottom: "%s" top: "%s" }\n'
                       % (res, short, x, res))
            out.append('layer { name: "%s_relu" type: "ReLU" bottom: "%s" top: "%s" }\n' % (res, res, res))
            prev = res
    out.append('layer { name: "pool5" type: "Pooling" bottom: "%s" top: "pool5" pooling_param { '
               'pool: AVE global_pooling: true } }\n' % prev)
    out.append('layer { name: "fc" type: "InnerProduct" bottom: "pool5" top: "fc" '
               'inner_product_param { num_output: 10 } }\n')
    out.append('layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }\n')
    return "".join(out)


def _q(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def hostile():
    """A TRAIN/TEST net whose layer and blob names are markup and script."""
    a, b, c, d = (_q(h) for h in HOSTILE)
    return ('name: "%s"\n' % a +
            'layer { name: "%s" type: "Input" top: "%s" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }\n' % (b, a) +
            'layer { name: "%s" type: "Convolution" bottom: "%s" top: "%s" convolution_param { num_output: 4 kernel_size: 3 } }\n' % (a, a, b) +
            'layer { name: "%s" type: "ReLU" bottom: "%s" top: "%s" include { phase: TRAIN } }\n' % (c, b, b) +
            'layer { name: "%s" type: "InnerProduct" bottom: "%s" top: "out" inner_product_param { num_output: 2 } }\n' % (d, b))


def make_workspace(folder, groups=2, steps=10):
    """A distributed run (in process, 2 worker groups, 2 server shards) in ``folder``: its
    visualization/net.json (placement and cluster) and its log ``train.log``; as
    tests/dist/test_operator_view.py runs one."""
    import importlib.util
    import io
    import os
    import numpy as np
    from caffepy import dist, log
    from caffepy.dist import topology
    from caffepy.solvers import get_solver
    spec = importlib.util.spec_from_file_location(
        "_dist_nets", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "dist", "nets.py"))
    nets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nets)
    saved, topology.SLICE_MIN = topology.SLICE_MIN, 1      # cut even these small params
    x, y = nets.data(10 * groups * 4)
    param = nets.solver_param(4, steps, "SGD")
    param.display = 2
    solver = get_solver(param, dtype=np.float64)
    c = nets.cluster(nworker_groups=groups, nworkers_per_group=1, nservers_per_group=2,
                     workspace=str(folder))
    os.makedirs(str(folder), exist_ok=True)
    log.setup(stream=io.StringIO(), logfile=os.path.join(str(folder), "train.log"))
    try:
        dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
    finally:
        log.teardown()
        topology.SLICE_MIN = saved
    return folder
