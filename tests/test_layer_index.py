"""docs/layers.md (type -> CPU class, GPU kernel, schema, tests) is what tools/gen_layer_index.py
makes from the registry now, and it names a real file for every type."""
import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
    spec = importlib.util.spec_from_file_location(
        "gen_layer_index", os.path.join(ROOT, "tools", "gen_layer_index.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_layer_index_is_current():
    assert _tool().main(["--check"]) == 0, "run: python tools/gen_layer_index.py"


def test_every_row_names_existing_files():
    text = open(os.path.join(ROOT, "docs", "layers.md"), encoding="utf-8").read()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) > 150
    for row in rows:
        for path in re.findall(r"`((?:caffepy|tests)/[\w/]+\.py)`", row):
            assert os.path.exists(os.path.join(ROOT, path)), (row, path)
    conv = next(r for r in rows if r.startswith("| `Convolution` | `ConvolutionLayer` "))
    assert "caffepy/layers/conv.py" in conv and "caffepy/gpu/layers/conv.py" in conv
    assert "ConvolutionParameter" in conv and "tests/layers/test_conv.py" in conv
