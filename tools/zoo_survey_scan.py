"""The static scan of tools/zoo_survey.py: what a net file's text says before caffepy reads it
(its top-level keys and its layer blocks' types, bottom counts and phase rules), and from that
whether the file is skipped (a solver, no layer block), declares its inputs with no data layer
(``deploy_with_inputs``) and has layers in phase TEST."""
import re

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|[{}:]|[-+\w.]+|\S')


def scan(text):
    """What the text says at the top level: layer blocks (type, bottoms, phase rules) and keys."""
    depth, path, prev, layers, keys, cur = 0, [], [], [], set(), None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok[0] == "#" or tok == ":":
            if tok == ":":
                prev.append(tok)
            continue
        if tok == "{":
            key = prev[-1] if prev and prev[-1] != ":" else (prev[-2] if len(prev) > 1 else "")
            path.append(key)
            depth += 1
            if depth == 1:
                keys.add(key)
                cur = {"type": "", "bottoms": 0, "include": [], "exclude": []} \
                    if key in ("layer", "layers") else None
                if cur is not None:
                    layers.append(cur)
            elif cur is not None and depth == 2 and key in ("include", "exclude"):
                cur[key].append(None)
        elif tok == "}":
            depth = max(depth - 1, 0)
            path = path[:depth]
        elif len(prev) >= 2 and prev[-1] == ":":
            key, val = prev[-2], tok.strip("\"'")
            if depth == 0:
                keys.add(key)
            elif cur is not None and depth == 1 and key in ("type", "bottom"):
                if key == "type":
                    cur["type"] = val
                else:
                    cur["bottoms"] += 1
            elif cur is not None and depth == 2 and key == "phase" and \
                    path[-1] in ("include", "exclude"):
                cur[path[-1]][-1] = val
        prev = (prev + [tok])[-3:]
    return layers, keys


def in_test(layer):
    if any(p in ("TEST", "1") for p in layer["exclude"]):
        return False
    return not layer["include"] or any(p in (None, "TEST", "1") for p in layer["include"])


def is_data(layer):
    t = layer["type"]
    return t.lower().endswith("data") or (t.lower() == "python" and layer["bottoms"] == 0)


def classify(text):
    """(skip reason or None, deploy_with_inputs, has TEST-phase layers)."""
    layers, keys = scan(text)
    solver = keys & {"net", "train_net", "test_net", "base_lr"}
    if solver and (not layers or keys & {"net_param", "train_net_param"}):
        return "solver", False, False
    if not layers:
        return "no layer block", False, False
    inputs = bool(keys & {"input", "input_shape", "input_dim"}) or \
        any(layer["type"] in ("Input", "INPUT") for layer in layers)
    deploy = inputs and not any(is_data(layer) for layer in layers)
    return None, deploy, any(in_test(layer) for layer in layers)
