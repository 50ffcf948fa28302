// caffepy view, part 1 of the page's script (page.py joins graph.js and panels.js in one
// function): the data, the graph (drawing, pan, zoom), selection, the layer panel, search.
// Every string from the data is shown through textContent or SVG text nodes, never as markup.
  var SVGNS = "http://www.w3.org/2000/svg";
  var DATA = JSON.parse(document.getElementById("caffepy-data").textContent);
  var st = {phase: DATA.phase, collapsed: false, sel: null, k: 1, x: 0, y: 0,
            matches: [], matchAt: -1, sortKey: null, sortDir: 1};
  var svg = document.getElementById("graph"), pane = document.getElementById("graph-pane");
  var root, nodeEls = [], edgeEls = [];

  function el(tag, attrs, text, parent) {
    var svgTag = tag.indexOf("svg:") === 0;
    var e = svgTag ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
    for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function human(n, unit) {
    if (n === null || n === undefined) return "?";
    var u = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "K"]];
    for (var i = 0; i < u.length; i++)
      if (Math.abs(n) >= u[i][0]) return (n / u[i][0]).toFixed(2) + u[i][1] + (unit || "");
    return String(n) + (unit || "");
  }
  function comma(n) { return n === null || n === undefined ? "?" : Number(n).toLocaleString("en-US"); }
  function shape(s) { return s ? (s.length ? s.join("\u00d7") : "scalar") : "?"; }
  function graph() { return DATA.phases[st.phase]; }

  // -- the graph ---------------------------------------------------------------------------------
  // view(): the nodes on screen: {kind: layer|input|block, i (index in its list), w, h, x, y}
  function view() {
    var g = graph(), c = st.collapsed && g.collapsed, out = [], nL = g.layers.length;
    var lay = c ? g.collapsed.layout : g.layout, sizes = c ? g.collapsed.sizes : g.sizes;
    if (!c) {
      for (var i = 0; i < sizes.length; i++)
        out.push({kind: i < nL ? "layer" : "input", i: i < nL ? i : i - nL});
    } else {
      var nb = g.blocks.length, seen = {};
      for (var b = 0; b < nb; b++) out.push({kind: "block", i: b});
      g.layers.forEach(function (lr, j) {
        var n = g.collapsed.node_of[j];
        if (n >= nb && !seen[n]) { seen[n] = 1; out[n] = {kind: "layer", i: j}; }
      });
      g.inputs.forEach(function (name, j) { out[g.collapsed.node_of[nL + j]] = {kind: "input", i: j}; });
    }
    out.forEach(function (n, k) {
      n.w = sizes[k][0]; n.h = sizes[k][1]; n.x = lay.nodes[k][0]; n.y = lay.nodes[k][1];
    });
    var edges = c ? g.collapsed.edges.map(function (e, k) { return [e[0], e[1], null, lay.edges[k]]; })
                  : g.edges.map(function (e, k) { return [e[0], e[1], e[2], lay.edges[k]]; });
    return {nodes: out, edges: edges, w: lay.w, h: lay.h};
  }

  function label(n) {
    var g = graph();
    if (n.kind === "layer") return [g.layers[n.i].name, g.layers[n.i].type];
    if (n.kind === "block") return [g.blocks[n.i].name, g.blocks[n.i].members.length + " layers"];
    return [g.inputs[n.i], "input"];
  }

  function blobShape(n, blob) {
    var g = graph();
    if (n.kind === "input") return g.input_shapes ? g.input_shapes[n.i] : null;
    if (n.kind !== "layer") return null;
    var lr = g.layers[n.i], j = lr.tops.indexOf(blob);
    return j >= 0 ? lr.top_shapes[j] : null;
  }
  function tooltip(n) {          // what hovering a node shows
    var g = graph();
    if (n.kind === "block") return g.blocks[n.i].name + ": " + g.blocks[n.i].members.length + " layers";
    if (n.kind === "input") return g.inputs[n.i] + " " + shape(blobShape(n));
    var lr = g.layers[n.i], out = [lr.name + " (" + lr.type + ")"];
    lr.tops.forEach(function (t, j) { out.push("→ " + t + " " + shape(lr.top_shapes[j])); });
    if (lr.param_count) out.push(comma(lr.param_count) + " params");
    if (lr.flops) out.push(human(lr.flops) + " FLOPs");
    if (lr.error) out.push("does not build: " + lr.error);
    return out.join("\n");
  }
  // a distributed run: where a layer's parameters live (the cluster's routes, else the
  // placement in net.json), and its worker group when the groups hold different layers
  var ROUTES = {};
  ((DATA.cluster && DATA.cluster.routes) || []).forEach(function (r) { ROUTES[r.param] = r; });
  function badge(lr) {
    var shards = {}, sfb = false, out = [], g = graph();
    (lr.params || []).forEach(function (q) {
      var r = ROUTES[q.name];
      if (r && r.route === "sfb") sfb = true;
      if (r) (r.shards || []).forEach(function (sh) { shards[sh.shard] = 1; });
      else if (q.placement && q.placement.server_shard !== undefined) shards[q.placement.server_shard] = 1;
    });
    if (g.groupsDiffer === undefined) {
      var seen = {};
      g.layers.forEach(function (l) { if (l.placement && l.placement.worker_group !== undefined) seen[l.placement.worker_group] = 1; });
      g.groupsDiffer = Object.keys(seen).length > 1;
    }
    if (g.groupsDiffer && lr.placement && lr.placement.worker_group !== undefined) out.push("wg " + lr.placement.worker_group);
    if (sfb) out.push("SFB");
    var ks = Object.keys(shards).sort(function (a, b) { return a - b; });
    if (ks.length) out.push((ks.length > 1 ? "shards " : "shard ") + ks.join(","));
    return out.join(" \u00b7 ");
  }
  function draw() {
    var v = view(), g = graph();
    clear(svg);
    var defs = el("svg:defs", {}, null, svg);
    var m = el("svg:marker", {id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse",
                              markerWidth: "7", markerHeight: "7", orient: "auto"}, null, defs);
    el("svg:path", {d: "M0,0 L10,5 L0,10 z", fill: "#777"}, null, m);
    root = el("svg:g", {id: "root"}, null, svg);
    var eg = el("svg:g", {}, null, root), ng = el("svg:g", {}, null, root);
    edgeEls = v.edges.map(function (e) {
      var a = v.nodes[e[0]], b = v.nodes[e[1]], p = e[3], d;
      if (p && p.length >= 8) {
        d = "M" + p[0] + "," + p[1];
        for (var j = 2; j + 5 < p.length + 1; j += 6)
          d += " C" + p.slice(j, j + 6).join(",");
      } else {
        var y0 = a.y + a.h / 2, y1 = b.y - b.h / 2, my = (y0 + y1) / 2;
        d = "M" + a.x + "," + y0 + " C" + a.x + "," + my + " " + b.x + "," + my + " " + b.x + "," + y1;
      }
      var path = el("svg:path", {"class": "edge", d: d, "marker-end": "url(#arrow)"}, null, eg);
      if (e[2] !== null) el("svg:title", {}, e[2] + " " + shape(blobShape(a, e[2])), path);
      return path;
    });
    nodeEls = v.nodes.map(function (n, k) {
      var cls = "node " + n.kind;
      if (n.kind === "layer") {
        cls += " fam-" + g.layers[n.i].family;
        if (g.layers[n.i].error) cls += " bad";
      }
      var t = el("svg:g", {"class": cls, "data-k": String(k),
                           transform: "translate(" + (n.x - n.w / 2) + "," + (n.y - n.h / 2) + ")"},
                 null, ng);
      el("svg:rect", {width: String(n.w), height: String(n.h), rx: "4"}, null, t);
      var l = label(n);
      el("svg:title", {}, tooltip(n), t);
      el("svg:text", {x: String(n.w / 2), y: String(n.h / 2 - 2)}, l[0], t);
      el("svg:text", {"class": "sub", x: String(n.w / 2), y: String(n.h / 2 + 9)}, l[1], t);
      var where = n.kind === "layer" ? badge(g.layers[n.i]) : "";
      if (where) el("svg:text", {"class": "badge", x: String(n.w + 4), y: String(n.h / 2 + 3)}, where, t);
      return t;
    });
    st.view = v;
    applyTransform();
    markSelection();
    search(document.getElementById("search").value, false);
  }

  function applyTransform() {
    if (root) root.setAttribute("transform", "translate(" + st.x + "," + st.y + ") scale(" + st.k + ")");
  }
  function fit() {
    var v = st.view, W = pane.clientWidth || 800, H = pane.clientHeight || 600;
    st.k = Math.min(1.2, (W - 20) / Math.max(v.w, 1), v.h > 0 ? Math.max((H - 20) / v.h, 0.25) : 1);
    st.x = (W - v.w * st.k) / 2;
    st.y = 10;
    applyTransform();
  }
  function centreOn(k) {
    var n = st.view.nodes[k], W = pane.clientWidth || 800, H = pane.clientHeight || 600;
    if (st.k < 0.6) st.k = 0.9;
    st.x = W / 2 - n.x * st.k;
    st.y = H / 2 - n.y * st.k;
    applyTransform();
  }

  // pan (drag) and zoom (wheel)
  var drag = null;
  pane.addEventListener("mousedown", function (ev) {
    drag = {x: ev.clientX, y: ev.clientY, sx: st.x, sy: st.y, moved: false};
  });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; pane.classList.add("dragging"); }
    st.x = drag.sx + dx; st.y = drag.sy + dy;
    applyTransform();
  });
  window.addEventListener("mouseup", function () {
    pane.classList.remove("dragging");
    setTimeout(function () { drag = null; }, 0);
  });
  pane.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = pane.getBoundingClientRect(), px = ev.clientX - r.left, py = ev.clientY - r.top;
    var f = Math.exp(-ev.deltaY * 0.0015), k = Math.max(0.02, Math.min(6, st.k * f));
    st.x = px - (px - st.x) * k / st.k; st.y = py - (py - st.y) * k / st.k; st.k = k;
    applyTransform();
  }, {passive: false});
  svg.addEventListener("click", function (ev) {
    if (drag && drag.moved) return;
    var t = ev.target.closest ? ev.target.closest(".node") : null;
    if (t) selectNode(Number(t.getAttribute("data-k")));
  });

  // -- selection and the side panel --------------------------------------------------------------
  function selectNode(k) {
    var n = st.view.nodes[k];
    st.sel = {kind: n.kind, i: n.i};
    markSelection();
    showPanel();
  }
  function selectLayer(i, centre) {
    var g = graph();
    if (st.collapsed && g.layers[i].block !== undefined && g.layers[i].block !== null) setCollapsed(false);
    st.sel = {kind: "layer", i: i};
    markSelection();
    showPanel();
    if (centre) {
      var k = nodeIndex(st.sel);
      if (k >= 0) centreOn(k);
    }
  }
  function nodeIndex(s) {
    if (!s || !st.view) return -1;
    for (var k = 0; k < st.view.nodes.length; k++)
      if (st.view.nodes[k].kind === s.kind && st.view.nodes[k].i === s.i) return k;
    return -1;
  }
  function markSelection() {
    var k = nodeIndex(st.sel);
    nodeEls.forEach(function (e, j) { e.classList.toggle("sel", j === k); });
    st.view.edges.forEach(function (e, j) { edgeEls[j].classList.toggle("sel", e[0] === k || e[1] === k); });
    var rows = document.querySelectorAll("#summary tbody tr");
    for (var r = 0; r < rows.length; r++)
      rows[r].classList.toggle("sel", !!st.sel && st.sel.kind === "layer" &&
                                       rows[r].getAttribute("data-i") === String(st.sel.i));
  }
  function kv(table, key, value) {
    var tr = el("tr", {}, null, table);
    el("td", {}, key, tr);
    el("td", {}, value, tr);
  }
  function blobTable(p, title, names, shapes) {
    if (!names.length) return;
    el("h3", {}, title, p);
    var t = el("table", {"class": title.toLowerCase()}, null, p);
    names.forEach(function (b, j) {
      var tr = el("tr", {}, null, t);
      el("td", {}, b, tr);
      el("td", {"class": "shape"}, shape(shapes && shapes[j]), tr);
    });
  }
  function placement(pl) {
    var out = [];
    if (!pl) return "";
    if (pl.worker_group !== undefined) out.push("worker group " + pl.worker_group);
    if (pl.worker !== undefined) out.push("worker " + pl.worker);
    if (pl.server_shard !== undefined) out.push("server shard " + pl.server_shard);
    return out.join(", ");
  }
  function showPanel() {
    var p = clear(document.getElementById("panel")), g = graph(), s = st.sel;
    showTab("panel");
    if (!s) { el("p", {"class": "note"}, "Click a layer to see its details.", p); return; }
    if (s.kind === "input") {
      el("h2", {}, g.inputs[s.i], p);
      var ti = el("table", {"class": "kv"}, null, p);
      kv(ti, "kind", "input blob (no layer writes it)");
      kv(ti, "shape", shape(g.input_shapes && g.input_shapes[s.i]));
      return;
    }
    if (s.kind === "block") {
      var b = g.blocks[s.i];
      el("h2", {}, b.name, p);
      var tb = el("table", {"class": "kv"}, null, p), tot = {param_count: null, flops: null, memory: null};
      b.members.forEach(function (i) {
        for (var key in tot) if (g.layers[i][key] !== null && g.layers[i][key] !== undefined) tot[key] += g.layers[i][key];
      });
      kv(tb, "block", b.members.length + " layers");
      kv(tb, "parameters", comma(tot.param_count));
      kv(tb, "FLOPs", human(tot.flops));
      kv(tb, "memory", human(tot.memory, "B"));
      el("h3", {}, "Layers (click to expand and show)", p);
      var ul = el("ul", {"class": "members"}, null, p);
      b.members.forEach(function (i) {
        var li = el("li", {}, g.layers[i].name + " (" + g.layers[i].type + ")", ul);
        li.addEventListener("click", function () { selectLayer(i, true); });
      });
      return;
    }
    var lr = g.layers[s.i];
    el("h2", {}, lr.name, p);
    if (lr.error) el("div", {"class": "error"}, "Does not build: " + lr.error, p);
    var t = el("table", {"class": "kv"}, null, p);
    kv(t, "type", lr.type + (lr.built_as ? " (built as " + lr.built_as + ")" : ""));
    kv(t, "family", lr.family);
    kv(t, "parameters", comma(lr.param_count));
    kv(t, "FLOPs", lr.flops === null || lr.flops === undefined ? "?" : human(lr.flops) + " (" + comma(lr.flops) + ")");
    kv(t, "memory", human(lr.memory, "B"));
    if (lr.placement && placement(lr.placement)) kv(t, "placement", placement(lr.placement));
    if (lr.block !== undefined && lr.block !== null) kv(t, "block", g.blocks[lr.block].name);
    (lr.forks || []).forEach(function (f) { el("div", {"class": "fork"}, f, p); });
    blobTable(p, "Bottoms", lr.bottoms, lr.bottom_shapes);
    blobTable(p, "Tops", lr.tops, lr.top_shapes);
    if (lr.params.length) {
      el("h3", {}, "Parameters", p);
      var pt = el("table", {"class": "params"}, null, p), hr = el("tr", {}, null, pt);
      ["blob", "shape", "count", "lr", "decay"].forEach(function (h) { el("th", {}, h, hr); });
      var withPl = lr.params.some(function (q) { return q.placement && placement(q.placement); });
      if (withPl) el("th", {}, "placement", hr);
      lr.params.forEach(function (q) {
        var tr = el("tr", {}, null, pt);
        el("td", {}, q.name, tr);
        el("td", {"class": "shape"}, shape(q.shape), tr);
        el("td", {"class": "num"}, comma(q.count), tr);
        el("td", {"class": "num"}, q.lr_mult === null || q.lr_mult === undefined ? "" : q.lr_mult, tr);
        el("td", {"class": "num"}, q.decay_mult === null || q.decay_mult === undefined ? "" : q.decay_mult, tr);
        if (withPl) el("td", {}, placement(q.placement), tr);
      });
    }
    if (lr.text) {
      el("h3", {}, "Prototxt", p);
      el("pre", {"class": "text"}, lr.text, p);
    } else if (lr.attrs && Object.keys(lr.attrs).length) {
      el("h3", {}, "Fields", p);
      el("pre", {"class": "text"}, JSON.stringify(lr.attrs, null, 1), p);
    }
  }

  // -- search ------------------------------------------------------------------------------------
  function search(q, jump) {
    q = (q || "").trim().toLowerCase();
    var g = graph(), v = st.view, found = [];
    nodeEls.forEach(function (e, k) {
      var n = v.nodes[k], hit = false;
      if (q) {
        if (n.kind === "block") {
          hit = g.blocks[n.i].name.toLowerCase().indexOf(q) >= 0 || g.blocks[n.i].members.some(function (i) {
            return (g.layers[i].name + "\u0000" + g.layers[i].type).toLowerCase().indexOf(q) >= 0;
          });
        } else {
          var l = label(n);
          hit = (l[0] + "\u0000" + l[1]).toLowerCase().indexOf(q) >= 0;
        }
      }
      e.classList.toggle("match", hit);
      if (hit) found.push(k);
    });
    found.sort(function (a, b) {        // exact names first, then in graph order
      var ea = label(v.nodes[a])[0].toLowerCase() === q, eb = label(v.nodes[b])[0].toLowerCase() === q;
      return ea === eb ? a - b : (ea ? -1 : 1);
    });
    st.matches = found;
    var info = document.getElementById("search-info");
    info.textContent = q ? (found.length ? found.length + " found" : "none") : "";
    if (jump && found.length) {
      st.matchAt = (st.matchAt + 1) % found.length;
      centreOn(found[st.matchAt]);
      info.textContent = (st.matchAt + 1) + " of " + found.length;
    }
  }
  var box = document.getElementById("search");
  box.addEventListener("input", function () { st.matchAt = -1; search(box.value, true); });
  box.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") search(box.value, true);
    if (ev.key === "Escape") { box.value = ""; search("", false); }
  });

