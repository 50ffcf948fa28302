// caffepy view: the page's script. Data come from the JSON script element; every string taken
// from the data is shown through textContent or SVG text nodes, never parsed as markup.
(function () {
  "use strict";
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
      if (e[2] !== null) el("svg:title", {}, e[2], path);
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
      el("svg:text", {x: String(n.w / 2), y: String(n.h / 2 - 2)}, l[0], t);
      el("svg:text", {"class": "sub", x: String(n.w / 2), y: String(n.h / 2 + 9)}, l[1], t);
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
      var tb = el("table", {"class": "kv"}, null, p), tot = {param_count: 0, flops: 0, memory: 0};
      b.members.forEach(function (i) { for (var key in tot) tot[key] += g.layers[i][key] || 0; });
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
  box.addEventListener("keydown", function (ev) { if (ev.key === "Enter") search(box.value, true); });

  // -- the summary table -------------------------------------------------------------------------
  var COLS = [["#", "i", 1], ["layer", "name", 0], ["type", "type", 0], ["top shapes", "shapes", 0],
              ["params", "param_count", 1], ["FLOPs", "flops", 1], ["memory", "memory", 1]];
  function table() {
    var g = graph(), t = clear(document.getElementById("summary"));
    var head = el("tr", {}, null, el("thead", {}, null, t));
    COLS.forEach(function (c) {
      var th = el("th", {"class": c[2] ? "num" : "", "data-key": c[1]},
                  c[0] + (st.sortKey === c[1] ? (st.sortDir > 0 ? " \u25b2" : " \u25bc") : ""), head);
      th.addEventListener("click", function () {
        st.sortDir = st.sortKey === c[1] ? -st.sortDir : (c[2] ? -1 : 1);
        st.sortKey = c[1];
        table();
      });
    });
    var rows = g.layers.map(function (lr, i) {
      return {i: i, name: lr.name, type: lr.type, shapes: lr.top_shapes.map(shape).join(", "),
              param_count: lr.param_count, flops: lr.flops, memory: lr.memory};
    });
    if (st.sortKey) {
      var key = st.sortKey, dir = st.sortDir;
      rows.sort(function (a, b) {
        var x = a[key], y = b[key];
        if (x === y) return a.i - b.i;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir;
      });
    }
    var body = el("tbody", {}, null, t);
    rows.forEach(function (r) {
      var tr = el("tr", {"data-i": String(r.i)}, null, body);
      el("td", {"class": "num"}, r.i + 1, tr);
      el("td", {}, r.name, tr);
      el("td", {}, r.type, tr);
      el("td", {}, r.shapes, tr);
      el("td", {"class": "num"}, comma(r.param_count), tr);
      el("td", {"class": "num"}, human(r.flops), tr);
      el("td", {"class": "num"}, human(r.memory, "B"), tr);
      tr.addEventListener("click", function () { selectLayer(r.i, true); showTab("table"); });
    });
    var tot = g.total, ft = el("tr", {}, null, el("tfoot", {}, null, t));
    el("td", {}, "", ft);
    el("td", {}, "total", ft);
    el("td", {}, g.layers.length + " layers", ft);
    el("td", {}, "", ft);
    el("td", {"class": "num"}, comma(tot.param_count), ft);
    el("td", {"class": "num"}, human(tot.flops), ft);
    el("td", {"class": "num"}, human(tot.memory, "B"), ft);
    markSelection();
  }

  // -- notes, cluster, curves --------------------------------------------------------------------
  function notes() {
    var p = clear(document.getElementById("notes")), g = graph();
    if (g.error) el("div", {"class": "error"}, g.error, p);
    (DATA.notes || []).concat(g.notes || []).forEach(function (n) { el("p", {"class": "note"}, n, p); });
  }
  function cluster() {
    var c = DATA.cluster, p = document.getElementById("cluster");
    if (!c) return;
    clear(p);
    el("h2", {}, "Cluster: " + (c.consistency || "?") + ", " + (c.engine || "?") + " engine", p);
    var held = {};
    (c.routes || []).forEach(function (r) {
      (r.shards || []).forEach(function (sh) {
        var where = sh.rows !== undefined ? "rows " + sh.rows + " (table)" :
          "[" + sh.offset + ":" + (sh.offset + sh.count) + ")";
        (held[sh.shard] = held[sh.shard] || []).push(r.param + " " + where);
      });
    });
    clusterDiagram(p, c, held);
    el("h3", {}, "Worker groups", p);
    var t = el("table", {"class": "groups"}, null, p), h = el("tr", {}, null, t);
    ["group", "server group", "workers", "per-host sums"].forEach(function (x) { el("th", {}, x, h); });
    (c.worker_groups || []).forEach(function (g) {
      var tr = el("tr", {}, null, t);
      el("td", {}, g.group, tr);
      el("td", {}, g.server_group === undefined ? "0" : g.server_group, tr);
      el("td", {}, (g.workers || []).map(function (w) { return "worker " + w.id + " @" + w.host + ":" + w.rank; }).join("; "), tr);
      el("td", {}, (g.stubs || []).map(function (s) { return s.stub + " @" + s.host + ":" + s.rank; }).join("; "), tr);
    });
    el("h3", {}, "Server shards and the slices they hold", p);
    var ts = el("table", {"class": "servers"}, null, p), hs = el("tr", {}, null, ts);
    ["server", "shard", "server group", "host:rank", "slices"].forEach(function (x) { el("th", {}, x, hs); });
    (c.servers || []).forEach(function (s) {
      var tr = el("tr", {}, null, ts);
      el("td", {}, s.id, tr);
      el("td", {}, s.shard, tr);
      el("td", {}, s.server_group, tr);
      el("td", {}, s.host + ":" + s.rank, tr);
      var td = el("td", {}, null, tr);
      (held[s.shard] || []).forEach(function (x) { el("div", {}, x, td); });
    });
    var routes = c.routes || [];
    if (routes.length) {
      el("h3", {}, "Parameter routes", p);
      var tr0 = el("table", {"class": "routes"}, null, p), hr = el("tr", {}, null, tr0);
      ["param", "count", "route", "shards"].forEach(function (x) { el("th", {}, x, hr); });
      routes.forEach(function (r) {
        var tr = el("tr", {}, null, tr0);
        el("td", {}, r.param, tr);
        el("td", {"class": "num"}, comma(r.count), tr);
        el("td", {}, r.route, tr);
        el("td", {}, (r.shards || []).map(function (s) { return s.shard; }).join(", "), tr);
      });
    }
  }
  // worker groups above, server shards below, a push / pull line between a group and each
  // server of its server group
  function clusterDiagram(p, c, held) {
    var groups = c.worker_groups || [], servers = c.servers || [];
    var BW = 150, GAP = 16, n = Math.max(groups.length, servers.length, 1);
    var lines = servers.map(function (s) { return 2 + (held[s.shard] || []).length; });
    var SH = 14 * Math.max.apply(null, lines.concat([3])) + 8;
    var GH = 14 * (1 + Math.max.apply(null, groups.map(function (g) { return (g.workers || []).length; }).concat([1]))) + 8;
    var W = n * (BW + GAP) + GAP, H = GH + SH + 70;
    var s = el("svg:svg", {id: "cluster-diagram", width: String(W), height: String(H)}, null, p);
    function row(items, y, h, cls, lines) {
      var off = (W - items.length * (BW + GAP) + GAP) / 2;
      return items.map(function (it, k) {
        var x = off + k * (BW + GAP), g = el("svg:g", {"class": cls}, null, s);
        el("svg:rect", {x: String(x), y: String(y), width: String(BW), height: String(h), rx: "5",
                        fill: cls === "group" ? "#dbe9f7" : "#f7e6d0", stroke: "#555"}, null, g);
        lines(it).forEach(function (t, j) {
          el("svg:text", {x: String(x + 6), y: String(y + 15 + 14 * j), "font-size": "11",
                          "font-weight": j ? "normal" : "bold"}, t, g);
        });
        return x + BW / 2;
      });
    }
    var gx = row(groups, 10, GH, "group", function (g) {
      return ["worker group " + g.group].concat((g.workers || []).map(function (w) {
        return "worker " + w.id + " @" + w.host + ":" + w.rank; }));
    });
    var sy = GH + 60;
    var sx = row(servers, sy, SH, "server", function (v) {
      return ["server " + v.id + ": shard " + v.shard, "@" + v.host + ":" + v.rank].concat(held[v.shard] || []);
    });
    groups.forEach(function (g, a) {
      servers.forEach(function (v, b) {
        if (v.server_group !== (g.server_group || 0)) return;
        el("svg:line", {x1: String(gx[a]), y1: String(10 + GH), x2: String(sx[b]), y2: String(sy),
                        stroke: "#777", "stroke-width": "1.2"}, null, s);
      });
    });
    el("svg:text", {x: String(W / 2), y: String(GH + 38), "text-anchor": "middle", "font-size": "10",
                    fill: "#555", stroke: "#fff", "stroke-width": "4", "paint-order": "stroke"},
       "push gradients / pull parameters", s);
  }
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  function chart(parent, title, series, logY) {
    var W = 520, H = 200, L = 52, R = 10, T = 20, B = 24;
    var xs = [], ys = [];
    series.forEach(function (s) {
      s.x.forEach(function (x, j) {
        var y = s.y[j];
        if (y === null || (logY && y <= 0)) return;
        xs.push(x); ys.push(logY ? Math.log10(y) : y);
      });
    });
    if (!xs.length) return;
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 = y0 + 1; y0 -= 1; }
    var s = el("svg:svg", {"class": "chart", width: String(W), height: String(H), "data-title": title}, null, parent);
    el("svg:text", {x: String(L), y: "12", "font-weight": "bold"}, title + (logY ? " (log scale)" : ""), s);
    function X(x) { return L + (x - x0) / (x1 - x0) * (W - L - R); }
    function Y(y) { return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B); }
    for (var k = 0; k <= 4; k++) {
      var yv = y0 + (y1 - y0) * k / 4, xv = x0 + (x1 - x0) * k / 4;
      el("svg:line", {"class": "grid", x1: String(L), x2: String(W - R), y1: String(Y(yv)), y2: String(Y(yv))}, null, s);
      el("svg:text", {x: String(L - 4), y: String(Y(yv) + 3), "text-anchor": "end"},
         logY ? Number(Math.pow(10, yv)).toPrecision(2) : Number(yv.toPrecision(3)), s);
      el("svg:text", {x: String(X(xv)), y: String(H - 8), "text-anchor": "middle"}, Math.round(xv), s);
    }
    el("svg:line", {"class": "axis", x1: String(L), x2: String(L), y1: String(T), y2: String(H - B)}, null, s);
    el("svg:line", {"class": "axis", x1: String(L), x2: String(W - R), y1: String(H - B), y2: String(H - B)}, null, s);
    var legend = el("div", {"class": "legend"}, null, parent);
    series.forEach(function (ser, j) {
      var pts = [];
      ser.x.forEach(function (x, i) {
        var y = ser.y[i];
        if (y === null || (logY && y <= 0)) return;
        pts.push(X(x).toFixed(1) + "," + Y(logY ? Math.log10(y) : y).toFixed(1));
      });
      var color = COLORS[j % COLORS.length];
      var pl = el("svg:polyline", {points: pts.join(" "), stroke: color}, null, s);
      el("svg:title", {}, ser.name, pl);
      var sp = el("span", {}, null, legend);
      el("i", {style: "background:" + color}, null, sp);
      sp.appendChild(document.createTextNode(ser.name));
    });
  }
  function curves() {
    var c = DATA.curves, p = document.getElementById("curves");
    if (!c) return;
    clear(p);
    el("p", {"class": "note"}, "From " + (c.files || []).join(", ") + (DATA.poll ? " (updating)" : " (snapshot)"), p);
    [["loss", "Loss", false], ["accuracy", "Accuracy", false], ["lr", "Learning rate", true],
     ["other", "Other outputs", false]].forEach(function (k) {
      var ss = c.series.filter(function (s) { return s.kind === k[0]; });
      if (ss.length) chart(p, k[1], ss, k[2]);
    });
  }
  function poll() {
    if (!DATA.poll) return;
    setInterval(function () {
      fetch("curves.json", {cache: "no-store"}).then(function (r) { return r.ok ? r.json() : null; })
        .then(function (c) {
          if (!c) return;
          DATA.curves = c;
          document.getElementById("tab-curves").disabled = false;
          curves();
        }).catch(function () {});
    }, DATA.poll_ms || 3000);
  }

  // -- tabs, phase, collapse ---------------------------------------------------------------------
  function showTab(name) {
    document.getElementById("side").classList.toggle("wide", name === "table");
    ["panel", "table", "cluster", "curves", "notes"].forEach(function (t) {
      document.getElementById("tab-" + t).classList.toggle("on", t === name);
      document.getElementById(t === "table" ? "table-wrap" : t).classList.toggle("on", t === name);
    });
  }
  ["panel", "table", "cluster", "curves", "notes"].forEach(function (t) {
    document.getElementById("tab-" + t).addEventListener("click", function () { showTab(t); });
  });
  function setPhase(p) {
    var old = st.sel && st.sel.kind === "layer" ? graph().layers[st.sel.i].name : null;
    st.phase = p;
    st.sel = null;
    var g = graph();
    if (old !== null) g.layers.forEach(function (lr, i) { if (lr.name === old) st.sel = {kind: "layer", i: i}; });
    if (!g.blocks.length) st.collapsed = false;
    syncButtons();
    draw();
    fit();
    table();
    notes();
    if (st.sel) showPanel();
  }
  function setCollapsed(on) {
    st.collapsed = !!on && graph().blocks.length > 0;
    syncButtons();
    draw();
    fit();
  }
  function syncButtons() {
    ["TRAIN", "TEST"].forEach(function (p) {
      var b = document.getElementById("phase-" + p);
      b.disabled = !DATA.phases[p];
      b.classList.toggle("on", st.phase === p);
    });
    var c = document.getElementById("collapse");
    c.disabled = !graph().blocks.length;
    c.classList.toggle("on", st.collapsed);
    c.textContent = st.collapsed ? "expand blocks" : "collapse blocks (" + graph().blocks.length + ")";
  }
  document.getElementById("phase-TRAIN").addEventListener("click", function () { setPhase("TRAIN"); });
  document.getElementById("phase-TEST").addEventListener("click", function () { setPhase("TEST"); });
  document.getElementById("collapse").addEventListener("click", function () { setCollapsed(!st.collapsed); });
  document.getElementById("fit").addEventListener("click", fit);

  document.getElementById("title").textContent = DATA.title + (DATA.file ? " \u2014 " + DATA.file : "");
  document.title = "caffepy view: " + DATA.title;
  document.getElementById("tab-cluster").disabled = !DATA.cluster;
  document.getElementById("tab-curves").disabled = !DATA.curves && !DATA.poll;
  if (!DATA.phases[st.phase]) st.phase = Object.keys(DATA.phases)[0];
  setPhase(st.phase);
  cluster();
  curves();
  poll();
  showTab(DATA.cluster ? "cluster" : "panel");
  if (!DATA.cluster) showPanel();
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
  document.body.setAttribute("data-ready", "1");
})();
