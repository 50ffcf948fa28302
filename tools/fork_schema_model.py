"""Schema models of caffe.proto files and the merge of harvested fork schemas into caffepy's.

Shared by ``tools/harvest_fork_schemas.py`` (which writes ``proto/harvest.json``) and
``tools/gen_caffe_proto.py`` (which declares the harvest in caffe.proto).

A *model* is what protoc makes of one caffe.proto, in plain data::

    {"messages": {"LayerParameter": {"fields": {name: field}, "enums": [...], "nested": [...]}},
     "enums": {"PoolingParameter.PoolMethod": {"MAX": 0, ...}}}

names relative to the file's package (nested ones joined with "."), and each field a *variant*
``{"number", "label", "type", "type_name", "default"}`` (``type`` as in caffe-schema.json,
``default`` as protoc canonicalizes it, absent when the field declares none).

The *plan* (:func:`plan`) decides, from the harvest and the model of caffepy's schema without it
(BVLC plus the curated additions, which win every name clash), what caffe.proto declares: per
field a variant of the type most forks give it, of those the one most forks use (ties: the one
whose number is free, then the lowest number), repeated when any fork has it repeated, never
required; the fork's number when free in caffepy's message, else one from :data:`RENUMBER_BASE`
up (per message, in sorted name order); enum values likewise. Items whose names would collide in
protobuf's scopes, or whose types do not resolve, are left out and listed. A field whose default
JSON name another field of its message has gets its own name as JSON name (protobuf rejects two fields with one JSON name).
"""
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

RENUMBER_BASE = 40000
#: {enum as old forks name it: the enum it became}: values harvested from the old one that the
#: later one lacks are declared in the later one too (text files name the value, so old prototxts
#: read; a value whose number the later enum uses is renumbered).
LEGACY_ENUMS = {"LayerParameter.LayerType": "V1LayerParameter.LayerType"}
#: {message as old forks name it: (the message it became, the enum only the old format has)}:
#: harvested fields of the old message in forks that declare that enum, and that the later message
#: lacks, are declared in the later one too.
LEGACY_MESSAGES = {"LayerParameter": ("V1LayerParameter", "LayerParameter.LayerType")}
_MAX_FIELD = 536870911
_TYPES = {getattr(descriptor_pb2.FieldDescriptorProto, "TYPE_" + t.upper()): t for t in (
    "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string", "group",
    "message", "bytes", "uint32", "enum", "sfixed32", "sfixed64", "sint32", "sint64")}
_LABELS = {1: "optional", 2: "required", 3: "repeated"}


class CompileError(Exception):
    pass


def compile_proto(path, workdir=None):
    """A FileDescriptorSet (bytes) of the proto file at ``path`` (compiled alone, as caffe.proto)."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        src = os.path.join(tmp, "caffe.proto")
        with open(path, "rb") as f, open(src, "wb") as g:
            g.write(f.read())
        out = os.path.join(tmp, "set.pb")
        run = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", tmp,
                              "--descriptor_set_out=" + out, "--include_imports", src],
                             capture_output=True, text=True)
        if run.returncode != 0:
            lines = [ln.replace(tmp + os.sep, "") for ln in run.stderr.splitlines() if ln.strip()]
            raise CompileError(lines[0] if lines else "protoc failed")
        with open(out, "rb") as f:
            return f.read()


def _rel(type_name, package):
    name = type_name.lstrip(".")
    return name[len(package) + 1:] if package and name.startswith(package + ".") else name


def model_of(descriptor_set):
    """The model of a compiled FileDescriptorSet (bytes); imports of google/protobuf skipped."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
    model = {"messages": {}, "enums": {}}
    for fd in fds.file:
        if fd.name.startswith("google/protobuf/"):
            continue
        for enum in fd.enum_type:
            model["enums"][enum.name] = {v.name: v.number for v in enum.value}
        for msg in fd.message_type:
            _add_message(model, msg, "", fd.package)
    return model


def _add_message(model, msg, prefix, package):
    name = prefix + msg.name
    if msg.options.map_entry:
        return
    entry = {"fields": {}, "enums": [], "nested": []}
    model["messages"][name] = entry
    for enum in msg.enum_type:
        model["enums"][name + "." + enum.name] = {v.name: v.number for v in enum.value}
        entry["enums"].append(enum.name)
    for sub in msg.nested_type:
        if not sub.options.map_entry:
            entry["nested"].append(sub.name)
            _add_message(model, sub, name + ".", package)
    maps = {name + "." + sub.name for sub in msg.nested_type if sub.options.map_entry}
    for f in msg.field:
        ftype = _TYPES[f.type]
        tname = _rel(f.type_name, package) if f.type_name else None
        if ftype == "group" or tname in maps or f.HasField("oneof_index"):
            continue
        var = {"number": f.number, "label": _LABELS[f.label], "type": ftype}
        if tname:
            var["type_name"] = tname
        if f.HasField("default_value"):
            var["default"] = f.default_value
        entry["fields"][f.name] = var


def model_of_proto(path):
    return model_of(compile_proto(path))


def json_name(name):
    """protoc's default JSON name of a field (two fields of a message must not share one)."""
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        else:
            out.append(ch.upper() if upper else ch)
            upper = False
    return "".join(out)


def variant_key(var):
    return (var["number"], var.get("label", ""), var.get("type", ""), var.get("type_name") or "",
            var.get("default", None) is not None, var.get("default") or "")


# --------------------------------------------------------------------------------------- the plan

def _pick(variants, taken):
    """A variant of the type (scalar type or message / enum) most forks use, whatever its number;
    of those the variant most forks use (ties: number free in ``taken``, then lowest number)."""
    per_type = {}
    for v in variants:
        kind = (v.get("type", ""), v.get("type_name") or "")
        per_type[kind] = per_type.get(kind, set()) | set(v["forks"])
    best = sorted(variants, key=lambda v: (
        -len(per_type[(v.get("type", ""), v.get("type_name") or "")]), -len(v["forks"]),
        v["number"] in taken, variant_key(v)))
    chosen = {k: v for k, v in best[0].items() if k != "forks"}
    if any(v["label"] == "repeated" for v in variants):
        if chosen["label"] != "repeated" and "default" in chosen:
            chosen["fork_default"] = chosen["default"]
        chosen["label"] = "repeated"
        chosen.pop("default", None)
    elif chosen["label"] == "required":
        chosen["label"] = "optional"
    return chosen


def _forks_of(variants):
    return sorted({f for v in variants for f in v["forks"]})


def _assign(items, taken, reserved=(0, -1), low=1, high=_MAX_FIELD):
    """items: [(name, wanted_number, n_forks)] -> {name: number}; renumbered ones from
    RENUMBER_BASE up in sorted name order. ``taken`` is updated."""
    out, later = {}, []
    for name, number, _ in sorted(items, key=lambda i: (-i[2], i[0])):
        free = (number not in taken and low <= number <= high and not 19000 <= number <= 19999
                and not reserved[0] <= number <= reserved[1])
        if free:
            out[name] = number
            taken.add(number)
        else:
            later.append(name)
    nxt = RENUMBER_BASE
    for name in sorted(later):
        while nxt in taken or reserved[0] <= nxt <= reserved[1]:
            nxt += 1
        out[name] = nxt
        taken.add(nxt)
    return out


def plan(harvest, base, reserved=None):
    """What caffe.proto declares from ``harvest`` on top of ``base`` (caffepy's model without it).

    Returns {"fields": {msg: [field dicts with "name", "forks"]}, "messages": [names],
    "enum_values": {enum: [(name, number, forks)]}, "enums": {enum: [(name, number, forks)]},
    "renumbered": {"Msg.field" or "Enum=VALUE": {"forks": {number: [forks]}, "caffepy": n}},
    "skipped": {item: why}}. ``reserved``: {message: [lo, hi]} numbers to keep free.
    """
    reserved = reserved or {}
    skipped = {}
    base_msgs, base_enums = base["messages"], base["enums"]
    new_msgs = sorted(m for m in harvest.get("messages", {}) if m not in base_msgs)
    new_enums = sorted(e for e in harvest.get("enums", {}) if e not in base_enums)
    # A new message or enum nested in one that is neither in caffepy nor new cannot be placed.
    every_msg = set(base_msgs) | set(new_msgs)
    for name in list(new_msgs):
        if "." in name and name.rsplit(".", 1)[0] not in every_msg:
            new_msgs.remove(name)
            skipped[name] = "its enclosing message is not declared"
    every_msg = set(base_msgs) | set(new_msgs)
    for name in list(new_enums):
        if "." in name and name.rsplit(".", 1)[0] not in every_msg:
            new_enums.remove(name)
            skipped[name] = "its enclosing message is not declared"
    # Scopes: every symbol (field, nested type, enum value) of a message, or of the package ("").
    scopes = {}

    def symbols(scope):
        if scope not in scopes:
            s = set()
            if scope in base_msgs:
                m = base_msgs[scope]
                s |= set(m["fields"]) | set(m["enums"]) | set(m["nested"])
            for e, values in base_enums.items():
                if (e.rsplit(".", 1)[0] if "." in e else "") == scope:
                    s |= set(values)
            if scope == "":
                s |= {m for m in base_msgs if "." not in m} | {e for e in base_enums if "." not in e}
            scopes[scope] = s
        return scopes[scope]

    def parent(name):
        return name.rsplit(".", 1)[0] if "." in name else ""

    for name in new_msgs + new_enums:          # type names first: values and fields come later
        if name.rsplit(".", 1)[-1] in symbols(parent(name)):
            skipped[name] = "its name is taken in %s" % (parent(name) or "the package")
        else:
            symbols(parent(name)).add(name.rsplit(".", 1)[-1])
    new_msgs = [m for m in new_msgs if m not in skipped]
    new_enums = [e for e in new_enums if e not in skipped]
    msg_names = set(base_msgs) | set(new_msgs)
    enum_names = set(base_enums) | set(new_enums)
    out = {"fields": {}, "messages": new_msgs, "enum_values": {}, "enums": {}, "renumbered": {},
           "skipped": skipped}

    def enum_block(enum, values, existing):
        """values: {name: [variants]} -> [(name, number, forks)] at free numbers."""
        scope = parent(enum)
        taken = set(existing.values())
        items, forks = [], {}
        for vname in sorted(values):
            if vname in existing:
                continue
            if vname in symbols(scope):
                skipped["%s=%s" % (enum, vname)] = "the name is taken in %s" % (scope or "the package")
                continue
            symbols(scope).add(vname)
            variants = values[vname]
            best = sorted(variants, key=lambda v: (-len(v["forks"]), v["number"] in taken, v["number"]))[0]
            items.append((vname, best["number"], len(_forks_of(variants))))
            forks[vname] = variants
        numbers = _assign(items, taken, low=-2 ** 31, high=2 ** 31 - 1)
        rows = []
        for vname, number in sorted(numbers.items(), key=lambda kv: (kv[1], kv[0])):
            rows.append((vname, number, _forks_of(forks[vname])))
            wanted = {v["number"] for v in forks[vname]}
            if number not in wanted:
                out["renumbered"]["%s=%s" % (enum, vname)] = {
                    "forks": {str(v["number"]): v["forks"] for v in forks[vname]}, "caffepy": number}
        return rows

    for enum in new_enums:
        rows = enum_block(enum, harvest["enums"][enum]["values"], {})
        if rows:
            out["enums"][enum] = rows
        else:
            skipped[enum] = "no value could be declared"
    out["enums"] = {e: r for e, r in out["enums"].items()}
    enum_names = set(base_enums) | set(out["enums"])
    for enum in sorted(harvest.get("enum_values", {})):
        if enum in base_enums:
            rows = enum_block(enum, harvest["enum_values"][enum], base_enums[enum])
            if rows:
                out["enum_values"][enum] = rows
    # Old-format enums under their later names (LayerParameter.LayerType of 2014 forks is what
    # BVLC renamed V1LayerParameter.LayerType): their values the later enum lacks are declared there
    # too, after its own harvested values (which keep their numbers).
    for old, later in sorted(LEGACY_ENUMS.items()):
        if old in harvest.get("enums", {}) and later in base_enums:
            existing = dict(base_enums[later])
            existing.update((v, n) for v, n, _ in out["enum_values"].get(later, []))
            values = {v: variants for v, variants in harvest["enums"][old]["values"].items()
                      if v not in existing}
            rows = enum_block(later, values, existing)
            if rows:
                out["enum_values"][later] = sorted(out["enum_values"].get(later, []) + rows,
                                                   key=lambda r: (r[1], r[0]))
    all_values = {e: set(v) for e, v in base_enums.items()}
    for e, rows in list(out["enums"].items()) + list(out["enum_values"].items()):
        all_values.setdefault(e, set()).update(r[0] for r in rows)

    # Fields: of existing messages (harvest "fields") and of new messages (their "fields").
    wanted = {}
    for msg, fields in harvest.get("fields", {}).items():
        if msg in base_msgs:
            wanted.setdefault(msg, {}).update(fields)
    for msg in new_msgs:
        for fname, variants in harvest["messages"][msg]["fields"].items():
            wanted.setdefault(msg, {}).setdefault(fname, variants)
        for fname, variants in harvest.get("fields", {}).get(msg, {}).items():
            wanted[msg].setdefault(fname, variants)
    # Fields of an old-format message (2014 forks' LayerParameter, BVLC's later V1LayerParameter)
    # that the later one lacks: declared there too, after its own harvested fields.
    late = {}
    for old, (later, marker) in sorted(LEGACY_MESSAGES.items()):
        old_forks = set(harvest.get("enums", {}).get(marker, {}).get("forks", []))
        if later not in base_msgs or not old_forks:
            continue
        for fname, variants in sorted(harvest.get("fields", {}).get(old, {}).items()):
            kept = [dict(v, forks=[f for f in v["forks"] if f in old_forks]) for v in variants]
            kept = [v for v in kept if v["forks"]]
            if kept and fname not in wanted.get(later, {}):
                late.setdefault(later, {})[fname] = kept
    rounds = [(m, wanted[m]) for m in sorted(wanted)] + [(m, late[m]) for m in sorted(late)]
    for msg, fields in rounds:         # (a late round keeps the numbers of the first)
        taken = {f["number"] for f in base_msgs.get(msg, {"fields": {}})["fields"].values()}
        taken |= {f["number"] for f in out["fields"].get(msg, [])}
        jsons = {json_name(f) for f in base_msgs.get(msg, {"fields": {}})["fields"]}
        jsons |= {f.get("json_name") or json_name(f["name"]) for f in out["fields"].get(msg, [])}
        chosen, items = {}, []
        for fname in sorted(fields):
            variants = fields[fname]
            if fname in symbols(msg):
                skipped["%s.%s" % (msg, fname)] = "the name is taken in %s" % msg
                continue
            var = _pick(variants, taken)
            tname = var.get("type_name")
            if var["type"] == "message" and tname not in msg_names or \
                    var["type"] == "enum" and tname not in enum_names:
                skipped["%s.%s" % (msg, fname)] = "its type %s is not declared" % tname
                continue
            if var["type"] == "enum" and "default" in var and var["default"] not in all_values[tname]:
                var.pop("default")
            if json_name(fname) in jsons:     # e.g. pad_out_W beside pad_out_w: its own JSON name
                var["json_name"] = fname
            symbols(msg).add(fname)
            jsons.add(var.get("json_name") or json_name(fname))
            chosen[fname] = (var, variants)
            items.append((fname, var["number"], len(_forks_of(variants))))
        numbers = _assign(items, taken, reserved=tuple(reserved.get(msg, (0, -1))))
        rows = []
        for fname in sorted(chosen, key=lambda n: (numbers[n], n)):
            var, variants = chosen[fname]
            if numbers[fname] != var["number"]:
                out["renumbered"]["%s.%s" % (msg, fname)] = {
                    "forks": _numbers(variants), "caffepy": numbers[fname]}
            rows.append(dict(var, name=fname, number=numbers[fname], forks=_forks_of(variants)))
        if rows:
            out["fields"][msg] = sorted(out["fields"].get(msg, []) + rows,
                                        key=lambda f: (f["number"], f["name"]))
    return out


def _numbers(variants):
    by = {}
    for v in variants:
        by.setdefault(str(v["number"]), set()).update(v["forks"])
    return {k: sorted(v) for k, v in sorted(by.items(), key=lambda kv: int(kv[0]))}
