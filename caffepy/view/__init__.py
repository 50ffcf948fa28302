"""``caffepy view``: a net as an interactive page (graph, layer panel, summary table, cluster,
training curves). :mod:`.data` builds the page's JSON from a prototxt, a net.json or a training
workspace; :mod:`.layout` places the nodes (Graphviz ``dot``, else layers in Python); :mod:`.page`
writes the self-contained HTML around ``static/graph.js``, ``panels.js`` and ``view.css``; :mod:`.server`
serves it on 127.0.0.1; :mod:`.curves` reads the training logs; :mod:`.forks` names the forks a
layer's type or fields come from.
"""
from .data import from_net_json, from_prototxt, from_workspace  # noqa: F401
from .page import render_page  # noqa: F401
