"""The page: one self-contained HTML file (inline CSS and script, no network) around the data.

The data (:mod:`caffepy.view.data`) sit in ``<script type="application/json">`` with ``<``, ``>``,
``&`` and U+2028 / U+2029 escaped, so no text of a net can close the element; the script
(static/graph.js and static/panels.js, joined in one function) reads them with ``JSON.parse``
and shows every string through ``textContent``. The Content-Security-Policy allows only that script (by its SHA-256), inline styles, and requests
to the page's own origin (the served page polls ``curves.json``).
"""
import base64
import hashlib
import json
import os

from ..draw.render import FAMILY_COLOR

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")

_BODY = """<header>
<h1 id="title"></h1>
<button id="phase-TRAIN" type="button">TRAIN</button><button id="phase-TEST" type="button">TEST</button>
<button id="collapse" type="button">collapse blocks</button>
<button id="fit" type="button">fit</button>
<input id="search" type="search" placeholder="search name or type" autocomplete="off">
<span id="search-info"></span>
</header>
<main>
<section id="graph-pane"><svg id="graph" xmlns="http://www.w3.org/2000/svg"></svg></section>
<aside id="side">
<nav id="tabs"><button id="tab-panel" type="button">Layer</button>
<button id="tab-table" type="button">Summary</button><button id="tab-cluster" type="button">Cluster</button>
<button id="tab-curves" type="button">Curves</button><button id="tab-notes" type="button">Notes</button></nav>
<div id="panel" class="tab"></div>
<div id="table-wrap" class="tab"><table id="summary"></table></div>
<div id="cluster" class="tab"></div>
<div id="curves" class="tab"></div>
<div id="notes" class="tab"></div>
</aside>
</main>
"""


def _static(name):
    with open(os.path.join(STATIC, name), encoding="utf-8") as f:
        return f.read()


def embed_json(doc):
    """``doc`` as JSON text safe inside a ``<script>`` element (no ``<``, ``>``, ``&``, U+2028/9)."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _family_css():
    return "\n".join(".node.fam-%s rect { fill: %s; }" % (fam, color)
                     for fam, color in sorted(FAMILY_COLOR.items()))


def render_page(doc):
    """The page's HTML (str) for a document of :mod:`caffepy.view.data`."""
    script = "(function () {\n\"use strict\";\n%s%s})();\n" % (_static("graph.js"), _static("panels.js"))
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = ("default-src 'none'; script-src 'sha256-%s'; style-src 'unsafe-inline'; "
           "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'" % digest)
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n',
        '<meta http-equiv="Content-Security-Policy" content="%s">\n' % csp,
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        "<title>caffepy view</title>\n<style>\n", _static("view.css"), _family_css(),
        "\n</style></head><body>\n", _BODY,
        '<script type="application/json" id="caffepy-data">', embed_json(doc), "</script>\n",
        "<script>", script, "</script>\n</body></html>\n"])
