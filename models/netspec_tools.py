"""Helpers shared by the model definitions written in the NetSpec DSL (models/<model>/*.py).

Each model module has ``outputs()`` -> {file name: NetParameter} and, run as a script, writes those
files beside itself (or into the directory given as its argument) with :func:`write_all`.
"""
import os
import sys

from caffepy import NetSpec
from caffepy.proto import caffe_pb2, io as proto_io


def with_test_data(name, train, test_layer):
    """A train/test NetParameter: ``train``'s first (TRAIN data) layer, then ``test_layer`` (a
    function filling a NetSpec with the TEST data layer under the same top names), then the rest."""
    t = NetSpec()
    test_layer(t)
    net = caffe_pb2.NetParameter(name=name)
    net.layer.extend([train.layer[0]] + list(t.to_proto().layer) + list(train.layer[1:]))
    return net


def named(name, net_param):
    net = caffe_pb2.NetParameter(name=name)
    net.layer.extend(net_param.layer)
    return net


def render(net_param, source):
    return ("# Generated from %s with the caffepy NetSpec DSL; regenerate with: python %s\n%s"
            % (source, source, proto_io.to_text(net_param)))


def write_all(outputs, module_file, out_dir=None):
    """Write every {file name: NetParameter} of a model module; returns the paths written."""
    here = os.path.dirname(os.path.abspath(module_file))
    out_dir = out_dir or here
    source = os.path.relpath(os.path.abspath(module_file), os.path.dirname(os.path.dirname(here)))
    paths = []
    for fname, net in outputs.items():
        path = os.path.join(out_dir, fname)
        proto_io.atomic_write(path, render(net, source).encode("utf-8"))
        paths.append(path)
    return paths


def script_main(outputs, module_file):
    out_dir = sys.argv[1] if len(sys.argv) > 1 else None
    for path in write_all(outputs(), module_file, out_dir):
        print(path)
