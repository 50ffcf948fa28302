"""Fields that change no math in caffepy: the memory, caching, precision and engine hints of major
forks, and the enum fields whose value picks no math.

Rules:

* a field the schema lacks whose name is in :data:`NO_MATH_NAMES` (in any message) is a hint:
  readers drop it and name it in one INFO line per file, strict or not
  (:mod:`caffepy.proto.unknown_fields`);
* a fork field the schema declares (proto/additions.d) that is a hint is listed per message in
  :data:`DECLARED_HINTS`; it parses normally and, when set, is named in the same INFO line
  (:func:`declared_hints`);
* an enum value the enum lacks, in a field named in :data:`NO_MATH_NAMES`, in its message's
  :data:`DECLARED_HINTS` or in :data:`SAFE_ENUM_FIELDS`, is dropped with a WARNING when reading
  is not strict; in any other field it stays an error
  (:class:`caffepy.proto.unknown_fields.UnknownValue`).

:func:`summarize` writes the names for those lines.
"""
from . import field_label

#: Unknown field names, in any message, that are hints changing no math in caffepy.
NO_MATH_NAMES = frozenset("""
    forward_type backward_type forward_math backward_math default_forward_type
    default_backward_type default_forward_math default_backward_math cudnn_math_override
    default_cudnn_math_override conv_algos_override default_conv_algos_override
    cudnn_convolution_algo_seeker reduce_buckets eltwise_mem_sharing mem_param global_grad_scale
    global_grad_scale_adaptive solver_data_type store_blobs_in_old_format
    cache precache threads parser_threads prefetch engine use_gpu_transform forward_packing
    display debug show_data
""".split())

#: Declared fork fields (message -> names) that are such hints: named in the INFO line when set.
DECLARED_HINTS = {
    "NetParameter": ("default_forward_type", "default_backward_type", "default_forward_math",
                     "default_backward_math", "global_grad_scale", "global_grad_scale_adaptive",
                     "default_conv_algos_override", "reduce_buckets", "default_cudnn_math_override",
                     "eltwise_mem_sharing", "engine"),
    "LayerParameter": ("forward_type", "backward_type", "forward_math", "backward_math", "debug",
                       "cudnn_math_override", "engine"),
    "DataParameter": ("threads", "parser_threads", "cache", "precache"),
    "ImageDataParameter": ("threads", "cache", "precache"),
    # Hao-Tju/GLP4NN_Caffe's parallel_degree: how many CUDA streams its GPU convolution spreads
    # a batch's images over; each image is convolved as before
    "ConvolutionParameter": ("cudnn_convolution_algo_seeker", "conv_algos_override",
                             "parallel_degree"),
    "DropoutParameter": ("engine",),
    "TransformationParameter": ("use_gpu_transform", "forward_packing", "display"),
    "BatchNormParameter": ("engine",), "ConcatParameter": ("engine",),
    "EltwiseParameter": ("engine",), "InnerProductParameter": ("engine",),
    "SolverParameter": ("solver_data_type", "store_blobs_in_old_format"),
}

#: Enum fields, beyond the hints above, whose value picks no math (device choice).
SAFE_ENUM_FIELDS = frozenset(["solver_mode"])


def summarize(names):
    """``a, b (x3)`` for a list of field names in first-seen order."""
    counts = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(n if c == 1 else "%s (x%d)" % (n, c) for n, c in counts.items())


def declared_hints(msg):
    """Names of the :data:`DECLARED_HINTS` fields set anywhere in ``msg`` (one per occurrence)."""
    out = []
    hints = DECLARED_HINTS.get(msg.DESCRIPTOR.name, ())
    for fd, value in msg.ListFields():
        if fd.name in hints:
            out.append(fd.name)
        if fd.message_type is not None and fd.message_type.name in DECLARED_HINTS:
            for sub in (value if field_label(fd) == "repeated" else [value]):
                out.extend(declared_hints(sub))
    return out
