// msc graph viewer: lays out one group level at a time with dagre (vendored), so a graph of
// any size shows only the boxes of the levels the user opened. Data: the JSON in #msc-data.
"use strict";
(function () {
  const T0 = performance.now();
  const D = JSON.parse(document.getElementById("msc-data").textContent);
  const J = D.joints, G = D.groups, OV = D.overlay;
  for (const j of J) { // the page leaves out what is empty, and the shape (the first output)
    j.shape = j.outputs.length ? j.outputs[0] : "";
    j.scope = j.scope || ""; j.attrs = j.attrs || {}; j.weights = j.weights || [];
  }
  const svg = document.getElementById("canvas"), scene = document.getElementById("scene");
  const PAD = 14, HEAD = 22, JH = 46, GH = 40;
  const expanded = new Set([0]);
  const cache = new Map(); // gid -> layout of its level (valid while nothing inside changes)
  const placed = new Map(); // joint index -> [x, y, w, h] of the last render
  const placedGroups = new Map(); // collapsed group id -> [x, y, w, h]
  let hits = [], hitPos = 0, box = {x: 0, y: 0, w: 100, h: 100};

  // joint -> innermost group, group -> parent; consumers from the producers lists
  const owner = new Int32Array(J.length), children = J.map(() => []);
  G.forEach((g, gid) => g.items.forEach(it => { if (it >= 0) owner[it] = gid; }));
  J.forEach((j, i) => j.parents.forEach(p => children[p].push(i)));

  const esc = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;"}[c]));
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "\u2026" : s);
  const fmt = v => (typeof v === "number" ? (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3)
    ? v.toExponential(3) : +v.toFixed(4)) : v);

  function gradient(t) {
    const stops = OV.gradient, x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
    const lo = Math.min(Math.floor(x), stops.length - 2), f = x - lo;
    const a = stops[lo], b = stops[lo + 1];
    let out = "#";
    for (const k of [1, 3, 5]) {
      const u = parseInt(a.substr(k, 2), 16), v = parseInt(b.substr(k, 2), 16);
      out += Math.round(u + (v - u) * f).toString(16).padStart(2, "0");
    }
    return out;
  }
  function position(v) { // as Overlay.position_of: linear, or log10 above the floor
    const log = OV.scale === "log", f = OV.floor;
    const lo = log ? Math.log10(f) : OV.lo, hi = log ? Math.log10(OV.hi) : OV.hi;
    const at = log ? Math.log10(Math.max(v, f)) : v;
    return hi > lo ? Math.min(Math.max((at - lo) / (hi - lo), 0), 1) : (OV.hi === 0 ? 0 : 1);
  }
  function ovColor(value) {
    if (!OV || value === undefined || value === null) return null;
    return gradient(position(value));
  }
  const groupValue = [], RULES = {mean: xs => xs.reduce((a, b) => a + b, 0) / xs.length,
    max: xs => Math.max(...xs), sum: xs => xs.reduce((a, b) => a + b, 0)};
  function valueOf(gid) { // the overlay over the joints under a group, by OV.group (memoized)
    if (groupValue[gid] !== undefined) return groupValue[gid];
    const xs = [], stack = [gid];
    while (stack.length) {
      for (const it of G[stack.pop()].items) {
        if (it < 0) stack.push(-it - 1);
        else if (J[it].name in OV.values) xs.push(OV.values[J[it].name]);
      }
    }
    return (groupValue[gid] = xs.length ? RULES[OV.group](xs) : null);
  }
  const focus = OV && OV.focus ? J.findIndex(j => j.name === OV.focus) : -1;

  function jointWidth(i) {
    const j = J[i];
    const n = Math.max(clip(j.name, 34).length, j.optype.length, clip(j.shape, 34).length);
    return Math.min(Math.max(n * 6.6 + 18, 96), 250);
  }
  function groupWidth(gid) { return Math.min(Math.max(clip(G[gid].label, 34).length * 6.8 + 30,
    130), 260); }
  function itemSize(it) {
    if (it >= 0) return [jointWidth(it), JH];
    const gid = -it - 1;
    if (!expanded.has(gid)) return [groupWidth(gid), GH];
    const inner = layout(gid);
    return [inner.w + 2 * PAD, inner.h + HEAD + PAD];
  }

  function layout(gid) { // dagre on this level's items; expanded children are big boxes
    if (cache.has(gid)) return cache.get(gid);
    const grp = G[gid], g = new dagre.graphlib.Graph();
    g.setGraph({rankdir: "TB", nodesep: 18, ranksep: 26, marginx: 0, marginy: 0});
    g.setDefaultEdgeLabel(() => ({}));
    grp.items.forEach((it, k) => {
      const [w, h] = itemSize(it);
      g.setNode(String(k), {width: w, height: h});
    });
    grp.edges.forEach(([a, b]) => g.setEdge(String(a), String(b)));
    dagre.layout(g);
    const nodes = grp.items.map((it, k) => g.node(String(k)));
    const edges = g.edges().map(e => [+e.v, +e.w, g.edge(e).points]);
    const out = {nodes, edges, w: g.graph().width || 0, h: g.graph().height || 0};
    cache.set(gid, out);
    return out;
  }

  function fillOf(i) {
    const c = OV ? ovColor(OV.values[J[i].name]) : null;
    return c || (OV ? "#ffffff" : D.colors[J[i].family]);
  }
  function drawJoint(out, i, x, y, w) {
    const j = J[i], cls = "joint" + (hits.includes(i) ? " hit" : "") + (i === focus ? " focus" : "");
    placed.set(i, [x, y, w, JH]);
    const tip = OV && j.name in OV.values ? ` ${OV.title}=${fmt(OV.values[j.name])}` : "";
    out.push(`<g class="${cls}" data-i="${i}" data-name="${esc(j.name)}" transform="translate(${
      x},${y})"><title>${esc(j.name + tip)}</title><rect width="${w}" height="${JH}" rx="4" fill="${
      fillOf(i)}"/><text x="8" y="14" class="jn">${esc(clip(j.name, 34))}</text><text x="8" y="28"
      class="jo">${esc(j.optype)}</text><text x="8" y="41" class="js">${
      esc(clip(j.shape, 34))}</text></g>`);
  }
  function drawGroup(out, gid, x, y, w) {
    const g = G[gid], m = OV ? valueOf(gid) : null, fill = m === null ? "#f4f6fb" : ovColor(m);
    placedGroups.set(gid, [x, y, w, GH]);
    out.push(`<g class="group" data-g="${gid}" transform="translate(${x},${y})"><title>${
      esc(g.label)} (${g.size} joints; click to expand)</title><rect width="${w}" height="${GH
      }" rx="7" fill="${fill}"/><text x="10" y="16" class="gl">\u25B8 ${esc(clip(g.label, 34))
      }</text><text x="10" y="31" class="gs">${g.size} joints${m === null ? "" : ` \u00B7 ${
      OV.group} ` + fmt(m)}</text></g>`);
  }
  function drawLevel(out, gid, ox, oy) {
    const lay = layout(gid), items = G[gid].items;
    const open = k => items[k] < 0 && expanded.has(-items[k] - 1);
    for (const [a, b, pts] of lay.edges) {
      if (open(a) || open(b)) continue; // crossEdges draws these joint to joint
      out.push(`<path class="edge" d="M${pts.map(p => `${p.x + ox},${p.y + oy}`).join("L")}"/>`);
    }
    items.forEach((it, k) => {
      const n = lay.nodes[k], x = ox + n.x - n.width / 2, y = oy + n.y - n.height / 2;
      if (it >= 0) drawJoint(out, it, x, y, n.width);
      else if (!expanded.has(-it - 1)) drawGroup(out, -it - 1, x, y, n.width);
      else {
        const sub = -it - 1;
        out.push(`<g class="cluster" data-g="${sub}"><rect x="${x}" y="${y}" width="${n.width
          }" height="${n.height}" rx="8"/><text x="${x + 8}" y="${y + 15}" class="ch">\u25BE ${
          esc(clip(G[sub].label, 60))} (${G[sub].size})</text></g>`);
        drawLevel(out, sub, x + PAD, y + HEAD);
      }
    });
  }

  function render() {
    const t = performance.now(), out = [], cross = [];
    placed.clear();
    placedGroups.clear();
    drawLevel(out, 0, 0, 0);
    crossEdges(cross);
    scene.innerHTML = cross.join("") + out.join(""); // the curves under the boxes
    const root = layout(0);
    window.mscView.lastRenderMs = performance.now() - t;
    return root;
  }

  function setBox(b) {
    box = b;
    svg.setAttribute("viewBox", `${b.x} ${b.y} ${b.w} ${b.h}`);
  }
  function fit(root) {
    const r = svg.getBoundingClientRect(), w = Math.max(root.w, 10) + 40;
    const h = Math.max(root.h, 10) + 40, s = Math.max(Math.min(r.width / w, r.height / h), 0.45);
    setBox({x: -20 - (r.width / s - w) / 2 * (r.width / s > w), y: -20, w: r.width / s,
      h: r.height / s});
  }
  function shown(i) { // [box, level] of what stands for joint i: itself or a closed group
    let rep = -1;
    for (let g = owner[i]; g > 0; g = G[g].parent) if (!expanded.has(g)) rep = g;
    return rep < 0 ? [placed.get(i), owner[i]] : [placedGroups.get(rep), G[rep].parent];
  }
  function crossEdges(out) { // edges between levels, as curves from box to box
    const seen = new Set();
    J.forEach((j, c) => j.parents.forEach(p => {
      const [a, la] = shown(p), [b, lb] = shown(c), key = a && b && `${a}|${b}`;
      if (!a || !b || a === b || la === lb || seen.has(key)) return;
      seen.add(key);
      const x1 = a[0] + a[2] / 2, y1 = a[1] + a[3], x2 = b[0] + b[2] / 2, y2 = b[1];
      const dy = Math.max(Math.abs(y2 - y1) / 2, 20);
      out.push(`<path class="edge x" d="M${x1},${y1}C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}"/>`);
    }));
  }
  function centerOn(i) { // and zoom in to full size when the view is zoomed out
    const p = placed.get(i), r = svg.getBoundingClientRect();
    if (!p) return;
    const k = Math.max(1, r.width / box.w), w = r.width / k, h = r.height / k;
    setBox({x: p[0] + p[2] / 2 - w / 2, y: p[1] + p[3] / 2 - h / 2, w, h});
  }

  function invalidate(gid) { for (let g = gid; g >= 0; g = G[g].parent) cache.delete(g); }
  function toggle(gid, open) {
    const t = performance.now();
    if (open) expanded.add(gid); else expanded.delete(gid);
    invalidate(gid);
    render();
    window.mscView.lastToggleMs = performance.now() - t;
  }
  function reveal(i) { // open every group holding joint i
    for (let g = owner[i]; g > 0; g = G[g].parent) {
      if (!expanded.has(g)) { expanded.add(g); invalidate(g); }
    }
  }

  function row(k, v) { return `<tr><th>${esc(k)}</th><td>${v}</td></tr>`; }
  function link(i) { return `<a href="#" data-go="${i}">${esc(J[i].name)}</a>`; }
  function showPanel(i) {
    const j = J[i], p = document.getElementById("panel");
    const rows = [row("optype", esc(j.optype)), row("family", esc(j.family)),
      row("scope", esc(j.scope || "-")),
      row("outputs", j.outputs.map(esc).join("<br>")),
      row("producers", j.parents.map(link).join("<br>") || "-"),
      row("consumers", children[i].map(link).join("<br>") || "-")];
    if (OV && j.name in OV.values) rows.unshift(row(OV.title, `<b>${fmt(OV.values[j.name])}</b>`));
    const attrs = Object.entries(j.attrs).map(([k, v]) => row(k, esc(clip(String(v), 80))));
    const weights = j.weights.map(w => row(w.role, `${esc(w.name)}<br>${esc(w.shape)}${
      w.min === undefined ? "" : `<br>min ${fmt(w.min)} max ${fmt(w.max)}<br>mean ${fmt(w.mean)
      } std ${fmt(w.std)}`}`));
    p.innerHTML = `<h3>${esc(j.name)}</h3><table>${rows.join("")}</table>` +
      (attrs.length ? `<h4>attrs</h4><table>${attrs.join("")}</table>` : "") +
      (weights.length ? `<h4>weights</h4><table>${weights.join("")}</table>` : "");
    p.classList.add("open");
  }

  function search(q) {
    const s = q.trim().toLowerCase();
    if (!s) { hits = []; render(); return []; }
    const exact = [], part = [];
    J.forEach((j, i) => { // a name, or a module path: "layers.1/attention/linear_3"
      const n = j.name.toLowerCase(), p = j.scope ? `${j.scope.toLowerCase()}/${n}` : n;
      if (n === s || p === s) exact.push(i); else if (p.includes(s)) part.push(i);
    });
    hits = exact.concat(part);
    hitPos = 0;
    document.getElementById("hits").textContent = `${hits.length} found`;
    goTo(hits[0]);
    return hits;
  }
  function goTo(i) {
    if (i === undefined) { render(); return; }
    reveal(i);
    render();
    showPanel(i); // first: the panel narrows the canvas
    centerOn(i);
  }

  svg.addEventListener("click", e => {
    const el = e.target.closest("[data-i],[data-g]");
    if (!el || dragged) return;
    if (el.dataset.i !== undefined) showPanel(+el.dataset.i);
    else toggle(+el.dataset.g, el.classList.contains("group"));
  });
  document.getElementById("panel").addEventListener("click", e => {
    const a = e.target.closest("[data-go]");
    if (a) { e.preventDefault(); goTo(+a.dataset.go); }
  });
  const input = document.getElementById("search");
  input.addEventListener("keydown", e => {
    if (e.key !== "Enter") return;
    if (hits.length && input.value === input.dataset.last) {
      hitPos = (hitPos + 1) % hits.length;
      goTo(hits[hitPos]);
    } else { input.dataset.last = input.value; search(input.value); }
  });
  document.addEventListener("keydown", e => { // "/" searches, Escape closes the panel
    if (e.key === "/" && document.activeElement !== input) { e.preventDefault(); input.focus(); }
    if (e.key === "Escape") document.getElementById("panel").classList.remove("open");
  });
  svg.addEventListener("wheel", e => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), k = Math.exp(e.deltaY * 0.0015);
    const px = box.x + (e.clientX - r.left) / r.width * box.w;
    const py = box.y + (e.clientY - r.top) / r.height * box.h;
    setBox({x: px - (px - box.x) * k, y: py - (py - box.y) * k, w: box.w * k, h: box.h * k});
  }, {passive: false});
  let drag = null, dragged = false;
  svg.addEventListener("mousedown", e => { drag = [e.clientX, e.clientY, box.x, box.y];
    dragged = false; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", e => {
    if (!drag) return;
    const r = svg.getBoundingClientRect(), dx = e.clientX - drag[0], dy = e.clientY - drag[1];
    if (Math.abs(dx) + Math.abs(dy) > 3) dragged = true;
    setBox({x: drag[2] - dx * box.w / r.width, y: drag[3] - dy * box.h / r.height, w: box.w,
      h: box.h});
  });
  document.getElementById("fit").addEventListener("click", () => fit(layout(0)));
  document.getElementById("collapse").addEventListener("click", () => {
    expanded.clear(); expanded.add(0); cache.clear(); fit(render());
  });

  if (OV) { // on a log scale: the decades between the ends, as ticks under the bar
    const lg = document.getElementById("legend"), log = OV.scale === "log";
    const lo = log ? OV.floor : OV.lo, ticks = [];
    if (log) {
      const e0 = Math.ceil(Math.log10(lo)), e1 = Math.floor(Math.log10(OV.hi));
      const step = Math.max(1, Math.ceil((e1 - e0 + 1) / 5)); // at most 5 labels on the bar
      for (let e = e0; e <= e1; e += step) {
        ticks.push(`<i style="left:${(position(10 ** e) * 100).toFixed(1)}%">1e${e}</i>`);
      }
    }
    lg.innerHTML = `<span>${esc(OV.title)}${log ? " (log)" : ""}</span> <span>${fmt(lo)
      }</span><span class="bar" data-scale="${OV.scale}" style="background:linear-gradient(${
      ""}to right,${OV.gradient.join(",")})">${ticks.join("")}</span><span>${fmt(OV.hi)}</span>`;
  }
  window.mscView = {
    toggle, search, reveal, render,
    visibleJoints: () => scene.querySelectorAll("g.joint").length, focus,
    groupOf: i => owner[i],
    subgroups: gid => G[gid].items.filter(it => it < 0).map(it => -it - 1),
  };
  fit(render());
  if (focus >= 0) goTo(focus); // the overlay's focus, opened in its group
  window.mscView.loadMs = performance.now() - T0; // parse + first layout and render
  window.mscView.readyAt = performance.now(); // since navigation start: what the user waits
  window.mscView.ready = true;
})();
