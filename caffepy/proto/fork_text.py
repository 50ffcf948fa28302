"""Text-level readings of fork files, before parsing: what a fork spells differently from the
schema caffepy keeps, rewritten so the file parses as that fork meant it.

- fields another fork made ``repeated`` (:data:`FORK_REPEATED`): the first value stands;
- singular BVLC fields that N-d forks give as a list or several times (:data:`ND_SPELLINGS`):
  read into caffepy's N-d field;
- V1 ``layers`` blocks whose ``type`` is a current name in quotes
  (:func:`respell_quoted_v1_types`), tried by :mod:`caffepy.proto.lenient_text`.

Each returns the rewritten text (or the readings to try) and logs one line naming the forks;
BVLC's own upgrades of legacy formats are in :mod:`caffepy.proto.upgrade`.
"""
import logging
import re

from .upgrade import V1, V1_TYPES
from .v1_fork_types import fork_v1_types

log = logging.getLogger(__name__)


# -- fork fields that another fork made repeated (text level, before parsing) ------------------

#: (message, field) that caffepy keeps singular as the most used fork declares it, while a fork
#: declares it ``repeated``: files of that fork giving it several times keep the first value.
#: TransformationParameter.resize_param (#8): optional in weiliu89/caffe (SSD) and its many forks;
#: repeated in eric612/MobileNet-YOLO, whose data layer draws one of the resize policies at random
#: per image (caffepy's data layers apply no random resize, so the first policy stands).
FORK_REPEATED = {("TransformationParameter", "resize_param"): "eric612/MobileNet-YOLO"}


def collapse_fork_repeated(text, descriptor, filename="<net>"):
    """``text`` with the 2nd+ values of :data:`FORK_REPEATED` fields blanked, or None when the
    text repeats no such field (another singular field given twice stays the parser's error)."""
    from . import unknown_fields
    try:
        dups = unknown_fields.find_repeated_singular(text, descriptor)
    except (IndexError, ValueError, RecursionError):   # too malformed / deep to scan: parser's error
        return None
    if not dups or any((d.message, d.name) not in FORK_REPEATED for d in dups):
        return None
    forks = sorted({FORK_REPEATED[(d.message, d.name)] for d in dups})
    log.info("%s: %d repeated %s block(s) (%s) ignored: the first of each stands",
             filename, len(dups), ", ".join(sorted({"%s.%s" % (d.message, d.name) for d in dups})),
             ", ".join(forks))
    return unknown_fields.blank(text, dups)


# -- singular BVLC fields that forks made repeated for N-d blobs (text level, before parsing) ---

_ND_FORKS = ("mzolfaghari/ECO-efficient-video-understanding (caffe_3d), "
             "VisionLearningGroup/R-C3D (caffe3d)")

#: (message, singular BVLC field) -> (repeated field caffepy reads it into, forks). A file giving
#: the field as a list (``kernel_size: [4, 7, 7]``) or several times in one block follows a fork
#: whose field is ``repeated`` (once, or once per spatial axis); a single value stays BVLC's field.
#: PoolingParameter's kernel_size (#2), stride (#3), pad (#4): repeated in the 3-D video forks
#: (their N-d cuDNN pooling; caffepy.forks.video.nd reads the N-d fields).
ND_SPELLINGS = {
    ("PoolingParameter", "kernel_size"): ("kernel_size_nd", _ND_FORKS),
    ("PoolingParameter", "stride"): ("stride_nd", _ND_FORKS),
    ("PoolingParameter", "pad"): ("pad_nd", _ND_FORKS),
}


def respell_nd_fields(text, descriptor, filename="<net>"):
    """``text`` with each :data:`ND_SPELLINGS` field that a block gives as a list or more than once
    renamed to its N-d field (every occurrence in that block), or None when there is none. One
    INFO line per file names the fields, the number of blocks and the forks."""
    from . import unknown_fields
    try:
        found = unknown_fields.find_list_spellings(text, descriptor, ND_SPELLINGS)
    except (IndexError, ValueError, RecursionError):   # too malformed / deep: the parser's error stands
        return None
    if not found:
        return None
    spots = [(start, f.name, ND_SPELLINGS[(f.message, f.name)][0])
             for f in found for start, _, _ in f.spots]
    fields = sorted({"%s.%s -> %s" % (f.message, f.name, ND_SPELLINGS[(f.message, f.name)][0])
                     for f in found})
    forks = sorted({ND_SPELLINGS[(f.message, f.name)][1] for f in found})
    log.info("%s: %d block(s) give a singular field as a list or repeatedly (N-d, as %s): "
             "read as %s", filename, len({f.block for f in found}),
             "; ".join(forks), ", ".join(fields))
    return unknown_fields.rename(text, spots)


# -- V1 ``layers`` blocks whose type is a current type name in quotes (text level) ---------------

_BLOCK_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|[{}:]|[A-Za-z_]\w*')


def _top_blocks(text):
    """(keyword, keyword token match, [(type token match, depth-1 `type` value)]) for each
    top-level block of ``text``."""
    blocks, depth, prev = [], 0, []
    for m in _BLOCK_TOKEN.finditer(text):
        tok = m.group()
        if tok[0] == "#":
            continue
        if tok == "{":
            if depth == 0:
                key = prev[-1] if prev and prev[-1].group() != ":" else (
                    prev[-2] if len(prev) > 1 else None)
                blocks.append((key.group() if key else "", key, []))
            depth += 1
        elif tok == "}":
            depth = max(depth - 1, 0)
        elif depth == 1 and len(prev) == 2 and prev[0].group() == "type" \
                and prev[1].group() == ":" and blocks:
            blocks[-1][2].append(m)
        prev = (prev + [m])[-2:]
    return blocks


def _current_to_v1():
    """{current type name: BVLC's V1 enum name} (forks' V1 values left out)."""
    forks, names = fork_v1_types(V1.LayerType), {}
    for number, new in sorted(V1_TYPES.items()):
        if number not in forks:
            names.setdefault(new, V1.LayerType.Name(number))
    return names


def respell_quoted_v1_types(text, filename="<net>"):
    """For a file whose V1 ``layers { type: "Convolution" }`` blocks give a current type name in
    quotes: [(text, how)], the readings to try in turn, or [] when no block does. First, when every
    such name has a V1 value and the file has no ``layer {}`` block, the names become those values
    (``type: CONVOLUTION``); then every ``layers`` block becomes a ``layer {}`` block (its V1 type
    values their current names in quotes)."""
    blocks = [b for b in _top_blocks(text) if b[0] == "layers"]
    quoted = [(b, t) for b in blocks for t in b[2] if t.group()[0] in "\"'"]
    if not quoted:
        return []
    v1_names = _current_to_v1()
    readings = []
    has_layer = any(b[0] == "layer" for b in _top_blocks(text))
    if not has_layer and all(t.group()[1:-1] in v1_names for _, t in quoted):
        edits = [(t.start(), t.end(), v1_names[t.group()[1:-1]]) for _, t in quoted]
        readings.append((_apply(text, edits), "their V1 values"))
    edits = []
    for _, key, types in blocks:
        edits.append((key.start(), key.end(), "layer"))
        for t in types:
            if t.group()[0] not in "\"'" and t.group() in V1.LayerType.keys():
                edits.append((t.start(), t.end(), '"%s"' % (
                    V1_TYPES.get(V1.LayerType.Value(t.group())) or t.group())))
    readings.append((_apply(text, edits), "current 'layer' blocks"))
    return readings


def quoted_v1_types_note(text, filename, how):
    blocks = [b for b in _top_blocks(text) if b[0] == "layers"]
    quoted = ["%d:%d %s" % (text.count("\n", 0, t.start()) + 1,
                            t.start() - text.rfind("\n", 0, t.start()), t.group())
              for b in blocks for t in b[2] if t.group()[0] in "\"'"]
    log.warning("%s: %d V1 'layers' block(s) give their type as a current name in quotes (the file "
                "mixes formats; Caffe refuses it, --strict too), read as %s: %s%s", filename,
                len(quoted), how, ", ".join(quoted[:5]),
                " ..." if len(quoted) > 5 else "")


def _apply(text, edits):
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text
