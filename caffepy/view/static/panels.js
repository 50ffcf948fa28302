// caffepy view, part 2 of the page's script: the summary table, notes, the cluster of a
// distributed run, training curves (polled when served), tabs, phases, blocks, start-up.
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
    var all = (DATA.notes || []).concat(g.notes || []);
    all.forEach(function (n) { el("p", {"class": "note"}, n, p); });
    var count = all.length + (g.error ? 1 : 0);
    document.getElementById("tab-notes").textContent = "Notes" + (count ? " (" + count + ")" : "");
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
