"""One-off (historical): merged ../shared/caffe-schema/fork-extensions.json into proto/additions.json.

proto/additions.json has been edited by hand since (extra zoo fields); it, not this script, is the
source of truth. Kept as the record of how fork numbers were assigned. Usage: merge_fork_schema.py OUT.json
"""
import json, sys
import os
SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "caffe-schema") + "/"
schema = json.load(open(SH + "caffe-schema.json"))
forks = json.load(open(SH + "fork-extensions.json"))
bv = {m["name"]: m for m in schema["messages"]}

ORDER = ["weiliu89__caffe", "intel__caffe", "hszhao__PSPNet", "sfzhang15__RefineDet", "shangzw12__ssd",
         "eric612__MobileNet-YOLO", "LisaAnne__lisa-caffe-public", "facebook__C3D_C3D-v1.1",
         "facebook__C3D_C3D-v1.0", "wy1iu__sphereface", "ydwen__caffe-face", "s9xie__hed"]
assert set(ORDER) == set(forks), set(forks) ^ set(ORDER)

def E(name, values, src):
    return {"name": name, "values": values, "source": src}

SSD = "weiliu89/caffe (SSD)"
# Enum definitions (facts looked up in the forks' caffe.proto; the extensions file names them only).
NEW_MSG_ENUMS = {
    "EmitConstraint": [E("EmitType", {"CENTER": 0, "MIN_OVERLAP": 1}, SSD)],
    "AnnotatedDatum": [E("AnnotationType", {"BBOX": 0}, SSD)],
    "ResizeParameter": [E("Resize_mode", {"WARP": 1, "FIT_SMALL_SIZE": 2, "FIT_LARGE_SIZE_AND_PAD": 3}, SSD),
                        E("Pad_mode", {"CONSTANT": 1, "MIRRORED": 2, "REPEAT_NEAREST": 3}, SSD),
                        E("Interp_mode", {"LINEAR": 1, "AREA": 2, "NEAREST": 3, "CUBIC": 4, "LANCZOS4": 5}, SSD)],
    "PriorBoxParameter": [E("CodeType", {"CORNER": 1, "CENTER_SIZE": 2, "CORNER_SIZE": 3}, SSD)],
    "MultiBoxLossParameter": [E("LocLossType", {"L2": 0, "SMOOTH_L1": 1}, SSD),
                              E("ConfLossType", {"SOFTMAX": 0, "LOGISTIC": 1}, SSD),
                              E("MatchType", {"BIPARTITE": 0, "PER_PREDICTION": 1}, SSD),
                              E("MiningType", {"NONE": 0, "MAX_NEGATIVE": 1, "HARD_EXAMPLE": 2}, SSD)],
    "VideoDataParameter": [E("VideoType", {"WEBCAM": 0, "VIDEO": 1}, SSD)],
    "SplitParameter": [E("Engine", {"DEFAULT": 0, "CAFFE": 1, "MKL2017": 3, "MKLDNN": 4}, "intel/caffe")],
    "QuantizationParameter": [E("Precision", {"DYNAMIC_FIXED_POINT": 0}, "intel/caffe"),
                              E("Rounding", {"NEAREST": 0}, "intel/caffe")],
    "EvalDetectionParameter": [E("ScoreType", {"OBJ": 0, "PROB": 1, "MULTIPLY": 2}, "intel/caffe")],
    "BNParameter": [E("Engine", {"DEFAULT": 0, "CAFFE": 1, "CUDNN": 2}, "hszhao/PSPNet")],
    "SegAccuracyParameter": [E("AccuracyMetric", {"PixelAccuracy": 0, "ClassAccuracy": 1, "PixelIOU": 2},
                               "hszhao/PSPNet (DeepLab)")],
    "BiasChannelParameter": [E("LabelType", {"IMAGE": 1, "PIXEL": 2}, "hszhao/PSPNet (DeepLab)")],
    "MarginInnerProductParameter": [E("MarginType", {"SINGLE": 0, "DOUBLE": 1, "TRIPLE": 2, "QUADRUPLE": 3},
                                      "wy1iu/sphereface")],
    "DownSamplingParameter": [E("DownSamplingType", {"VOTE": 0}, "facebook/C3D v1.0 (default value only; "
                                "other values unverified)")],
    "Yolov3Parameter": [E("IOU_LOSS", {"MSE": 0}, "eric612/MobileNet-YOLO (default value only; other "
                          "values unverified)")],
}
# Enums that forks add inside BVLC messages.
BVLC_MSG_ENUMS = {
    "ConcatParameter": [E("Engine", {"DEFAULT": 0, "CAFFE": 1, "MKL2017": 3, "MKLDNN": 4}, "intel/caffe")],
    "BatchNormParameter": [E("Engine", {"DEFAULT": 0, "CAFFE": 1, "MKL2017": 3, "MKLDNN": 4}, "intel/caffe")],
    "EltwiseParameter": [E("Engine", {"DEFAULT": 0, "CAFFE": 1, "MKL2017": 3, "MKLDNN": 4}, "intel/caffe")],
    "InnerProductParameter": [E("Engine", {"DEFAULT": 0, "CAFFE": 1, "CUDNN": 2, "MKLDNN": 3}, "intel/caffe")],
    "ConvolutionParameter": [E("FusionType", {"NONE_FUSION": 0}, "intel/caffe (default value only; other "
                                "values unverified)")],
    "ImageDataParameter": [E("LabelType", {"NONE": 0, "IMAGE": 1, "PIXEL": 2}, "hszhao/PSPNet (DeepLab)")],
}
# Values that Intel Caffe adds to BVLC engine enums (prototxt files say `engine: MKL2017`).
ENUM_VALUES = {q: {"MKL2017": 3, "MKLDNN": 4, "_source": "intel/caffe"} for q in
               ["ConvolutionParameter.Engine", "LRNParameter.Engine", "PoolingParameter.Engine",
                "ReLUParameter.Engine"]}
ENUM_VALUES["LossParameter.NormalizationMode"] = {
    "PRE_FIXED": 100, "_source": "intel/caffe and soeaver/caffe-model (#3 there, which BVLC uses for NONE; "
    "text files parse, a fork binary's 3 reads as NONE)"}
# type_name of an enum field -> qualified name, by (message, field)
ENUM_QUAL = {"code_type": "PriorBoxParameter.CodeType", "anno_type": "AnnotatedDatum.AnnotationType",
             ("Pooling3DParameter", "pool"): "PoolingParameter.PoolMethod"}

def qual(msg, f):
    t = f["type_name"]
    if (msg, f["name"]) in ENUM_QUAL:
        return ENUM_QUAL[(msg, f["name"])]
    if f["name"] in ENUM_QUAL:
        return ENUM_QUAL[f["name"]]
    for owner, enums in list(NEW_MSG_ENUMS.items()) + list(BVLC_MSG_ENUMS.items()):
        if owner == msg and any(e["name"] == t for e in enums):
            return "%s.%s" % (owner, t)
    for owner, enums in NEW_MSG_ENUMS.items():
        if any(e["name"] == t for e in enums):
            return "%s.%s" % (owner, t)
    raise SystemExit("unresolved enum %s.%s -> %s" % (msg, f["name"], t))

RESERVED = {"LayerParameter", "SolverParameter", "NetParameter"}  # 20000-20999 kept for caffepy
next_free = {}

def alloc(msg, used):
    n = next_free.get(msg, 10000)
    while n in used:
        n += 1
    next_free[msg] = n + 1
    return n

added = {}      # BVLC message -> list of fields
newmsgs = {}    # name -> {"name","fields","enums","sources"}
notes = []

# C3D v1.0's "LayerParameter" is BVLC's V1 layout (layers { ... } with enum types): map onto V1.
REMAP_MSG = {("facebook__C3D_C3D-v1.0", "LayerParameter"): "V1LayerParameter"}

def fork_short(k):
    return k.replace("__", "/")

for fork in ORDER:
    for mname, v in forks[fork].items():
        target = REMAP_MSG.get((fork, mname), mname)
        is_new = target not in bv
        if is_new:
            m = newmsgs.setdefault(target, {"name": target, "fields": [], "enums": NEW_MSG_ENUMS.get(target, []),
                                            "sources": []})
            if fork_short(fork) not in m["sources"]:
                m["sources"].append(fork_short(fork))
            have = m["fields"]
            used = {f["number"] for f in have}
            bvnames = set()
        else:
            have = added.setdefault(target, [])
            bvf = bv[target]["fields"]
            used = {f["number"] for f in bvf} | {f["number"] for f in have}
            bvnames = {f["name"] for f in bvf}
        for f in v["fields"]:
            if f["name"] in bvnames:
                continue
            prev = next((g for g in have if g["name"] == f["name"]), None)
            if prev is not None:
                if prev["type"] != f["type"] or prev.get("type_name") != f.get("type_name") \
                        and f["type"] == "message":
                    notes.append("%s.%s: %s declares it %s, kept %s" % (target, f["name"], fork, f["type"],
                                                                          prev["type"]))
                if f["number"] != prev.get("fork_number", prev["number"]):
                    prev.setdefault("other_numbers", {})[fork_short(fork)] = f["number"]
                continue
            g = {k: f[k] for k in ("name", "number", "label", "type") if k in f}
            if g["label"] == "required":
                g["label"] = "optional"
                g["was_required"] = True
            if f["type"] == "message":
                g["type_name"] = f["type_name"]
            elif f["type"] == "enum":
                g["type_name"] = qual(target, f)
            if "default" in f and g["label"] != "repeated":
                g["default"] = f["default"]
            src = "%s #%d" % (fork_short(fork), f["number"])
            if f["number"] in used or (target in RESERVED and 20000 <= f["number"] <= 20999):
                g["number"] = alloc(target, used)
                src += " -> %d (collision)" % g["number"]
            g["fork_number"] = f["number"]
            used.add(g["number"])
            note = "fork field: " + src
            if g.pop("was_required", False):
                note += "; required in the fork, optional here"
            g["note"] = note
            have.append(g)

def finish(f):
    other = f.pop("other_numbers", None)
    f.pop("fork_number", None)
    if other:
        f["note"] += "; also " + ", ".join("%s #%d" % kv for kv in sorted(other.items()))
    return f

out_fields = {m: [finish(f) for f in fs] for m, fs in added.items()}
# Field the catalogue needs that no extension file lists.
out_fields.setdefault("PoolingParameter", []).append(
    {"name": "ceil_mode", "number": 20, "label": "optional", "type": "bool", "default": True,
     "note": "fork field (soeaver/caffe-model and others): true = Caffe's ceil rounding, false = floor; "
             "20 is free in BVLC and every fork in fork-extensions.json"})
msgs = []
for m in newmsgs.values():
    m["fields"] = [finish(f) for f in m["fields"]]
    m["note"] = "fork message: " + ", ".join(m.pop("sources"))
    msgs.append(m)
extra = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_schema_extra.json")))
for m in extra.get("messages", []):
    msgs.append(m)
for mname, fs in extra.get("fields", {}).items():
    if mname in newmsgs:
        newmsgs[mname]["fields"].extend(fs)
    else:
        out_fields.setdefault(mname, []).extend(fs)

doc = ("caffepy additions to BVLC caffe.proto (regenerate caffe.proto and caffe_pb2.py with "
       "tools/gen_caffe_proto.py). 'fields': fields added to BVLC messages; 'messages': new messages; "
       "'message_enums': enums added inside BVLC messages; 'enum_values': values added to BVLC enums; "
       "'enums': new top-level enums. Fork fields and messages are the union, by name, of every fork in "
       "../shared/caffe-schema/fork-extensions.json (fork order: %s); a field keeps its fork's number unless "
       "that number collides with a BVLC field or an earlier added field of the same message, in which case "
       "it gets the next free number from 10000 up (each field's note says which). Fork 'required' labels "
       "become 'optional' (layers validate). Reserved for caffepy's own additions: numbers 20000-20999 of "
       "LayerParameter, SolverParameter and NetParameter (distributed training); never use them for fork "
       "fields. tests/proto/test_schema.py checks that nothing collides." % ", ".join(map(fork_short, ORDER)))
res = {"_doc": doc, "reserved": {m: [20000, 20999] for m in sorted(RESERVED)},
       "fields": dict(sorted(out_fields.items())), "message_enums": BVLC_MSG_ENUMS,
       "enum_values": ENUM_VALUES, "messages": msgs, "enums": [], "_merge_notes": notes}
json.dump(res, open(sys.argv[1], "w"), indent=1)
print(len(msgs), "messages;", sum(len(v) for v in out_fields.values()), "fields;", len(notes), "notes")
for n in notes: print(" ", n)
