"""The fuzz targets: every reader of untrusted input, with its seeds and mutators.

A target is ``(name, family, make)``; ``make(src, workdir)`` builds one input from the choices of
``src`` (a :class:`harness.Source`), writes it under ``workdir`` and returns ``(fn, args, name)``:
the reader call to run and what its error must name. Seeds are real files written by caffepy's own
writers (built once per process, lazily) and the repository's models/*.prototxt.

The seeds and mutators are in seeds.py, the targets in proto_targets.py and store_targets.py;
this module lists the targets (``TARGETS``), runs one and provides every seed, mutator, target
and reader call of those modules under its own name.
"""
import math
import os

try:
    from . import harness
    from .proto_targets import (_binary_net, _binaryproto, _caffemodel, _caffemodel_bytes,
                                _copy_from, _datum_record, datum_seeds, _db_record, _export, _frame,
                                frame_seeds, _lmdb, _lmdb_layer, _onnx, _plan_batch, _prototxt_net,
                                _prototxt_solver, _read_state_both, _record_bytes, _solverstate)
    from .seeds import (_blob_edit, caffemodel_seeds, _fields, _FLOATS, _int_range, mean_seed,
                        mutate_message, mutate_proto_bytes, mutate_text, _net_blobs, ROOT,
                        _seed_dir, SOLVER_V1, solverstate_seeds, text_seeds, TINY_NET, tiny_net,
                        _TOKENS, V0_NET, V1_NET, _value, _write)
    from .store_targets import (_checkpoint, checkpoint_seed, _ckpt_header_edit, _ckpt_run, _h5_put,
                                _h5_structured, _h5_value, _hdf5_data, _hdf5_data_run, _hdf5_layer,
                                hdf5_weight_seed, _hdf5_weights, _json_edit, _load_hdf5, _netjson,
                                netjson_seed, _read_net_json, _solverstate_h5)
except ImportError:             # imported as a top-level module (tools/fuzz.py, pytest rootdir)
    import harness
    from proto_targets import (_binary_net, _binaryproto, _caffemodel, _caffemodel_bytes,
                               _copy_from, _datum_record, datum_seeds, _db_record, _export, _frame,
                               frame_seeds, _lmdb, _lmdb_layer, _onnx, _plan_batch, _prototxt_net,
                               _prototxt_solver, _read_state_both, _record_bytes, _solverstate)
    from seeds import (_blob_edit, caffemodel_seeds, _fields, _FLOATS, _int_range, mean_seed,
                       mutate_message, mutate_proto_bytes, mutate_text, _net_blobs, ROOT, _seed_dir,
                       SOLVER_V1, solverstate_seeds, text_seeds, TINY_NET, tiny_net, _TOKENS,
                       V0_NET, V1_NET, _value, _write)
    from store_targets import (_checkpoint, checkpoint_seed, _ckpt_header_edit, _ckpt_run, _h5_put,
                               _h5_structured, _h5_value, _hdf5_data, _hdf5_data_run, _hdf5_layer,
                               hdf5_weight_seed, _hdf5_weights, _json_edit, _load_hdf5, _netjson,
                               netjson_seed, _read_net_json, _solverstate_h5)

__all__ = [
    "_binary_net", "_binaryproto", "_blob_edit", "_caffemodel", "_caffemodel_bytes",
    "caffemodel_seeds", "_checkpoint", "checkpoint_seed", "_ckpt_header_edit", "_ckpt_run",
    "_copy_from", "_datum_record", "datum_seeds", "_db_record", "_export", "_fields", "_FLOATS",
    "_frame", "frame_seeds", "_h5_put", "_h5_structured", "_h5_value", "_hdf5_data",
    "_hdf5_data_run", "_hdf5_layer", "hdf5_weight_seed", "_hdf5_weights", "_int_range",
    "_json_edit", "_lmdb", "_lmdb_layer", "_load_hdf5", "mean_seed", "mutate_message",
    "mutate_proto_bytes", "mutate_text", "_net_blobs", "_netjson", "netjson_seed", "_onnx",
    "_plan_batch", "_prototxt_net", "_prototxt_solver", "_read_net_json", "_read_state_both",
    "_record_bytes", "ROOT", "run_one", "_seed_dir", "SOLVER_V1", "_solverstate",
    "_solverstate_h5", "solverstate_seeds", "TARGETS", "targets", "text_seeds", "TINY_NET",
    "tiny_net", "_TOKENS", "V0_NET", "V1_NET", "_value", "warm", "_write"]


TARGETS = [
    ("prototxt_net", "prototxt", _prototxt_net),
    ("prototxt_solver", "prototxt", _prototxt_solver),
    ("caffemodel", "binary", _caffemodel),
    ("binary_net", "binary", _binary_net),
    ("solverstate", "binary", _solverstate),
    ("binaryproto", "binary", _binaryproto),
    ("hdf5_weights", "hdf5", _hdf5_weights),
    ("hdf5_data", "hdf5", _hdf5_data),
    ("solverstate_h5", "hdf5", _solverstate_h5),
    ("checkpoint", "checkpoint", _checkpoint),
    ("netjson", "netjson", _netjson),
    ("frames", "frames", _frame),
    ("onnx_export", "onnx", _onnx),
    ("db_record", "db", _db_record),
    ("lmdb_data", "db", _lmdb),
]


def targets(family=None):
    return [t for t in TARGETS if family is None or t[1] == family]


def run_one(make, src, workdir):
    """Build one input and run its reader; (problem or None, outcome)."""
    for name in os.listdir(workdir):
        p = os.path.join(workdir, name)
        if os.path.isdir(p):
            import shutil
            shutil.rmtree(p)
        else:
            os.unlink(p)
    fn, args, name = make(src, workdir)
    out = harness.run_case(fn, *args)
    return harness.problem(out, name), out


def warm():
    """Build every seed (before forking, so children share them)."""
    text_seeds(), caffemodel_seeds(), solverstate_seeds(), mean_seed(), hdf5_weight_seed()
    _hdf5_layer(), checkpoint_seed(), netjson_seed(), frame_seeds(), datum_seeds()
    math.isfinite(0)
