// Cachalot analytics UI: plain JavaScript and canvas, no dependencies.
// Pages (hash routes): #/ overview, #/pool/NAME, #/dataset/NAME,
// #/analytics?stat=S&by=D&filter=D=V...&range=60s[&from=T&to=T].
// Every page refreshes once per second from /api/analytics/*.
"use strict";

const COLORS = ["#3b82c4", "#e07b39", "#4aa564", "#c94c4c", "#8e6bbf", "#b8860b", "#2aa1a1", "#d36fb0", "#999"];
const $ = (id) => document.getElementById(id);
let stats = [];          // from /api/analytics/stats
let timer = null;
let view = null;         // the analytics page state
let drag = null;         // chart drag selection

async function api(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of params) if (v !== undefined && v !== null && v !== "") u.append(k, v);
  return u.toString();
}

function fmtRate(x) {
  if (x >= 1e9) return (x / 1e9).toFixed(2) + "G";
  if (x >= 1e6) return (x / 1e6).toFixed(2) + "M";
  if (x >= 1e3) return (x / 1e3).toFixed(2) + "K";
  return x >= 10 ? x.toFixed(0) : x.toFixed(2);
}
function fmtBytes(x) {
  const u = ["B", "K", "M", "G", "T"];
  let i = 0;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return (i ? x.toFixed(1) : x.toFixed(0)) + u[i];
}
function fmtNs(ns) {
  if (!ns) return "-";
  if (ns < 1e3) return ns + "ns";
  if (ns < 1e6) return (ns / 1e3).toFixed(1) + "us";
  if (ns < 1e9) return (ns / 1e6).toFixed(1) + "ms";
  return (ns / 1e9).toFixed(2) + "s";
}
function fmtTime(t) { return new Date(t * 1000).toLocaleTimeString(); }
function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function statInfo(name) { return stats.find((s) => s.name === name); }

// ---- charts ----

function setupCanvas(c) {
  const ratio = window.devicePixelRatio || 1;
  const w = c.clientWidth || c.width, h = c.clientHeight || c.height;
  if (c.width !== w * ratio) { c.style.width = w + "px"; c.style.height = h + "px"; c.width = w * ratio; c.height = h * ratio; }
  const g = c.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  return { g, w, h };
}

// Stacked area chart of series.lines over series.times.
function drawSeries(c, series, sel) {
  const { g, w, h } = setupCanvas(c);
  const L = 56, B = 20, T = 8;
  g.clearRect(0, 0, w, h);
  const n = series.times.length;
  const sums = new Array(n).fill(0);
  for (const l of series.lines) l.points.forEach((p, i) => { sums[i] += p; });
  const max = Math.max(1e-9, ...sums);
  const x = (i) => L + (i / Math.max(1, n - 1)) * (w - L - 8);
  const y = (v) => h - B - (v / max) * (h - B - T);
  g.font = "11px sans-serif"; g.fillStyle = "#567"; g.strokeStyle = "#e3e7eb";
  if (max <= 1e-9) { g.fillText("no events", L + 8, h / 2); c._geom = { L, right: w - 8, times: series.times }; return; }
  const ticks = h < 120 ? 2 : 4;
  for (let k = 0; k <= ticks; k++) {
    const v = (max * k) / ticks;
    g.beginPath(); g.moveTo(L, y(v)); g.lineTo(w - 8, y(v)); g.stroke();
    g.fillText(series.unit === "bytes" ? fmtBytes(v) : fmtRate(v), 4, y(v) + 4);
  }
  if (n > 1) {
    g.fillText(fmtTime(series.times[0]), L, h - 4);
    const last = fmtTime(series.times[n - 1]);
    g.fillText(last, w - 8 - g.measureText(last).width, h - 4);
  }
  const base = new Array(n).fill(0);
  series.lines.forEach((l, li) => {
    g.beginPath();
    for (let i = 0; i < n; i++) { const v = base[i] + l.points[i]; i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v)); }
    for (let i = n - 1; i >= 0; i--) g.lineTo(x(i), y(base[i]));
    g.closePath();
    g.fillStyle = COLORS[li % COLORS.length] + "cc";
    g.fill();
    l.points.forEach((p, i) => { base[i] += p; });
  });
  if (sel) {
    g.fillStyle = "rgba(30,60,120,.15)";
    g.fillRect(Math.min(sel.x0, sel.x1), T, Math.abs(sel.x1 - sel.x0), h - B - T);
  }
  c._geom = { L, right: w - 8, times: series.times };
}

// Heat map: columns are times, rows are buckets (low at the bottom).
function drawHeat(c, hm) {
  const { g, w, h } = setupCanvas(c);
  g.clearRect(0, 0, w, h);
  const L = 70, B = 16, nb = hm.buckets.length, nt = hm.times.length;
  if (!nb || !nt) { g.fillStyle = "#789"; g.fillText("no timed events in this range", L, h / 2); return; }
  let max = 1;
  for (const row of hm.counts) for (const v of row) max = Math.max(max, v);
  const cw = (w - L - 8) / nt, ch = (h - B) / nb;
  for (let t = 0; t < nt; t++) for (let b = 0; b < nb; b++) {
    const v = hm.counts[t][b];
    if (!v) continue;
    const a = Math.log1p(v) / Math.log1p(max);
    g.fillStyle = `rgba(200,60,30,${0.15 + 0.85 * a})`;
    g.fillRect(L + t * cw, h - B - (b + 1) * ch, Math.ceil(cw), Math.ceil(ch));
  }
  g.fillStyle = "#567"; g.font = "10px sans-serif";
  const step = Math.max(1, Math.ceil(nb / 8));
  for (let b = 0; b < nb; b += step) {
    const lo = hm.buckets[b][0];
    g.fillText(hm.by === "size" ? fmtBytes(lo) : fmtNs(lo), 2, h - B - b * ch - 2);
  }
}

// The dimension that says where in a volume an operation fell: scsi.ops's
// `region` (which 1/32 of the LUN, "00".."31") or nbd.ops's `offset` (start of the
// region, "0", "64M", "1G"...). "" for other statistics.
function offsetDim(stat) {
  const dims = (statInfo(stat) || {}).dims || [];
  return dims.includes("region") ? "region" : dims.includes("offset") ? "offset" : "";
}

function offsetValue(dim, label) {
  if (dim === "region") return /^\d+$/.test(label) ? Number(label) : NaN;
  const m = /^(\d+)([KMGT]?)$/.exec(label);
  return m ? Number(m[1]) * 1024 ** " KMGT".indexOf(m[2] || " ") : NaN;
}

// Offset heat map: columns are times, rows are regions of the volume (offset 0 at
// the bottom); every region of a LUN has its row, hot or not. The rows with
// operations, hottest first, are left in the canvas's data-hot attribute.
function drawOffsetHeat(c, series, dim) {
  const { g, w, h } = setupCanvas(c);
  g.clearRect(0, 0, w, h);
  const byLabel = new Map();
  for (const l of series.lines) {
    if (!Number.isNaN(offsetValue(dim, l.value))) byLabel.set(l.value, l.points);
  }
  if (dim === "region") {
    for (let r = 0; r < 32; r++) {
      const k = String(r).padStart(2, "0");
      if (!byLabel.has(k)) byLabel.set(k, series.times.map(() => 0));
    }
  }
  const rows = [...byLabel.keys()].sort((a, b) => offsetValue(dim, a) - offsetValue(dim, b));
  const totals = rows.map((k) => byLabel.get(k).reduce((a, b) => a + b, 0));
  c.dataset.rows = String(rows.length);
  c.dataset.hot = rows.map((k, i) => [k, totals[i]]).filter((r) => r[1] > 0)
    .sort((a, b) => b[1] - a[1]).map((r) => r[0]).join(",");
  const L = 50, B = 16, nr = rows.length, nt = series.times.length;
  if (!nr || !nt || !totals.some((t) => t > 0)) {
    g.fillStyle = "#789"; g.fillText("no operations with an offset in this range", L, h / 2); return;
  }
  let max = 0;
  for (const k of rows) for (const v of byLabel.get(k)) max = Math.max(max, v);
  const cw = (w - L - 8) / nt, ch = (h - B) / nr;
  rows.forEach((k, r) => {
    byLabel.get(k).forEach((v, t) => {
      if (!v) return;
      const a = Math.log1p(v) / Math.log1p(max);
      g.fillStyle = `rgba(200,60,30,${0.15 + 0.85 * a})`;
      g.fillRect(L + t * cw, h - B - (r + 1) * ch, Math.ceil(cw), Math.ceil(ch));
    });
  });
  g.fillStyle = "#567"; g.font = "10px sans-serif";
  const step = Math.max(1, Math.ceil(nr / 8));
  for (let r = 0; r < nr; r += step) g.fillText(rows[r], 2, h - B - r * ch - 2);
}

function legend(el, series) {
  el.innerHTML = series.lines.map((l, i) =>
    `<span><i style="background:${COLORS[i % COLORS.length]}"></i>${esc(l.value)}</span>`).join("");
}

// ---- analytics page ----

function parseHash() {
  const [path, q] = location.hash.replace(/^#/, "").split("?");
  return { path: path || "/", params: new URLSearchParams(q || "") };
}

function analyticsHash(v) {
  const p = [["stat", v.stat], ["by", v.by], ["drill", v.drill], ["range", v.range], ["from", v.from], ["to", v.to]];
  for (const f of v.filters) p.push(["filter", f]);
  return "#/analytics?" + qs(p);
}

function queryDims(info) { return info ? info.dims : []; }

function nextDim(v) {
  const info = statInfo(v.stat);
  const used = new Set(v.filters.map((f) => f.split("=")[0]).concat([v.by]));
  return queryDims(info).find((d) => !used.has(d)) || "";
}

function fillSelect(sel, values, current) {
  sel.innerHTML = values.map((v) => `<option value="${esc(v)}"${v === current ? " selected" : ""}>${esc(v || "(total)")}</option>`).join("");
}

function openAnalytics(params) {
  const v = {
    stat: params.get("stat") || "fuse.ops",
    by: params.get("by") ?? "op",
    drill: params.get("drill") || "",
    range: params.get("range") || "60s",
    from: params.get("from") || "",
    to: params.get("to") || "",
    filters: params.getAll("filter"),
  };
  if (!v.drill) v.drill = nextDim(v);
  view = v;
  fillSelect($("stat"), stats.map((s) => s.name), v.stat);
  const dims = queryDims(statInfo(v.stat));
  fillSelect($("by"), [""].concat(dims), v.by);
  fillSelect($("drill"), dims, v.drill);
  $("range").value = v.range;
  $("live").hidden = !v.from;
  $("by-head").textContent = v.by || "total";
  $("filters").innerHTML = v.filters.map((f, i) => `<span class="chip" data-i="${i}" title="remove filter">${esc(f)}</span>`).join("");
  $("heat-box").hidden = !(statInfo(v.stat) || {}).dims?.includes("latency");
  $("offset-box").hidden = !offsetDim(v.stat);
  refresh();
}

function go(v) { location.hash = analyticsHash(v); }

async function refreshAnalytics() {
  const v = view;
  const range = v.from ? [["from", v.from], ["to", v.to]] : [["last", v.range]];
  const filters = v.filters.map((f) => ["filter", f]);
  const base = [["stat", v.stat], ...filters, ...range];
  try {
    const [series, table] = await Promise.all([
      api("/api/analytics/series?" + qs([...base, ["by", v.by === "latency" || v.by === "size" ? "" : v.by], ["top", 8]])),
      api("/api/analytics/show?" + qs([...base, ["by", v.by], ["top", 50]])),
    ]);
    if (view !== v) return;
    $("error").hidden = true;
    drawSeries($("chart"), series, drag);
    legend($("legend"), series);
    renderTable(table);
    if (!$("heat-box").hidden) {
      const hm = await api("/api/analytics/heatmap?" + qs([...base, ["by", "latency"]]));
      drawHeat($("heat"), hm);
    }
    const od = offsetDim(v.stat);
    if (od && view === v) {
      const oh = await api("/api/analytics/series?" + qs([...base, ["by", od], ["top", 1000]]));
      drawOffsetHeat($("offset-heat"), oh, od);
    }
    $("status").textContent = (v.from ? "range " : "live · ") + "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    $("error").hidden = false;
    $("error").textContent = e.message;
  }
}

function renderTable(t) {
  const unitBytes = t.unit === "bytes";
  const prim = (r) => (unitBytes ? r.bytes_rate : r.rate);
  const max = Math.max(1e-9, ...t.rows.map(prim));
  $("total").textContent = unitBytes ? fmtBytes(t.total.bytes_rate) + "/s" : fmtRate(t.total.rate) + " ops/s";
  $("total").dataset.rate = String(prim(t.total));
  const clickable = !!view.by && view.by !== "latency" && view.by !== "size";
  $("rows").innerHTML = t.rows.map((r) =>
    `<tr class="${clickable ? "click" : ""}" data-value="${esc(r.value)}">` +
    `<td>${esc(r.value)}</td><td class="bar-col"><div class="bar" style="width:${(100 * prim(r)) / max}%"></div></td>` +
    `<td class="num">${fmtRate(r.rate)}</td><td class="num">${fmtBytes(r.bytes_rate)}</td>` +
    `<td class="num">${fmtNs(r.avg_latency_ns)}</td></tr>`).join("");
  $("table-title").textContent = `${t.stat} by ${t.by || "total"} (${fmtTime(t.from)}–${fmtTime(t.to)}, per ${t.resolution})`;
}

// ---- overview and detail pages ----

async function panel(el, title, stat, by, filters, link) {
  const base = [["stat", stat], ["last", "60s"], ...filters.map((f) => ["filter", f])];
  const div = document.createElement("div");
  div.className = "panel";
  div.innerHTML = `<h3>${esc(title)}</h3><canvas width="280" height="70"></canvas><table></table>`;
  div.onclick = () => go({ stat, by, drill: "", range: "60s", from: "", to: "", filters });
  el.appendChild(div);
  div._update = async () => {
    try {
      const [s, t] = await Promise.all([
        api("/api/analytics/series?" + qs([...base, ["by", by], ["top", 4]])),
        api("/api/analytics/show?" + qs([...base, ["by", by], ["top", 4]])),
      ]);
      drawSeries(div.querySelector("canvas"), s);
      const bytes = t.unit === "bytes";
      div.querySelector("table").innerHTML = t.rows.map((r) =>
        `<tr><td>${esc(r.value)}</td><td class="num">${bytes ? fmtBytes(r.bytes_rate) + "/s" : fmtRate(r.rate) + "/s"}</td></tr>`).join("");
    } catch (e) {
      div.querySelector("table").innerHTML = `<tr><td>${esc(e.message)}</td></tr>`;
    }
  };
}

function panelsFor(el, list) {
  el.innerHTML = "";
  for (const p of list) panel(el, ...p);
}

async function refreshOverview() {
  try {
    const ov = await api("/api/analytics/overview");
    const pools = (ov.pools || []).map((p) =>
      `<tr class="click" data-href="#/pool/${encodeURIComponent(p.name)}"><td>${esc(p.name)}</td><td>${fmtBytes(p.size || 0)}</td><td>${fmtBytes(p.alloc || 0)}</td><td>${fmtBytes(p.free || 0)}</td><td>${esc(p.health || "-")}</td></tr>`).join("");
    const ds = (ov.datasets || []).map((d) =>
      `<tr class="click" data-href="#/dataset/${encodeURIComponent(d.name)}"><td>${esc(d.name)}</td><td>${esc(d.type || "")}</td><td>${fmtBytes(d.used || 0)}</td><td>${fmtBytes(d.available || 0)}</td><td>${esc(d.mountpoint || "-")}</td></tr>`).join("");
    $("ov").innerHTML = `<h2>Pools</h2><table><tr><th>NAME</th><th>SIZE</th><th>ALLOC</th><th>FREE</th><th>HEALTH</th></tr>${pools}</table>` +
      `<h2>Datasets</h2><table><tr><th>NAME</th><th>TYPE</th><th>USED</th><th>AVAIL</th><th>MOUNTPOINT</th></tr>${ds}</table>`;
  } catch (e) { /* keep the server-rendered tables */ }
}

function refreshPanels(el) { for (const p of el.children) if (p._update) p._update(); }

function route() {
  const { path, params } = parseHash();
  for (const id of ["page-overview", "page-detail", "page-analytics"]) $(id).hidden = true;
  $("nav-overview").className = path === "/" ? "on" : "";
  $("nav-analytics").className = path === "/analytics" ? "on" : "";
  drag = null;
  if (path === "/manage") return; // manage.js shows that page
  if (path === "/analytics") {
    $("page-analytics").hidden = false;
    openAnalytics(params);
    return;
  }
  const m = path.match(/^\/(pool|dataset)\/(.+)$/);
  if (m) {
    const name = decodeURIComponent(m[2]);
    $("page-detail").hidden = false;
    $("detail-title").textContent = (m[1] === "pool" ? "Pool " : "Dataset ") + name;
    panelsFor($("detail-panels"), m[1] === "pool" ? [
      ["transaction group commits", "txg.commits", "pool", [`pool=${name}`]],
      ["disk bytes by device", "disk.bytes", "device", []],
      ["disk ops by op", "disk.ops", "op", []],
      ["ARC accesses", "arc.accesses", "result", []],
    ] : [
      ["FUSE ops by op", "fuse.ops", "op", [`dataset=${name}`]],
      ["FUSE bytes by file", "fuse.bytes", "file", [`dataset=${name}`]],
      ["NFS ops by client", "nfs.ops", "client", [`share=${name}`]],
      ["NFS bytes by file", "nfs.bytes", "file", [`share=${name}`]],
      ["InnoDB I/O by kind", "innodb.ops", "kind", [`dataset=${name}`]],
      ["InnoDB I/O by table", "innodb.ops", "table", [`dataset=${name}`]],
      ["intent log commits", "zil.commits", "dataset", [`dataset=${name}`]],
    ]);
    view = null;
    refresh();
    return;
  }
  $("page-overview").hidden = false;
  panelsFor($("ov-panels"), [
    ["FUSE ops by dataset", "fuse.ops", "dataset", []],
    ["FUSE bytes by op", "fuse.bytes", "op", []],
    ["NFS ops by share", "nfs.ops", "share", []],
    ["InnoDB I/O by kind", "innodb.ops", "kind", []],
    ["disk bytes by device", "disk.bytes", "device", []],
  ]);
  view = null;
  refresh();
}

function refresh() {
  const { path } = parseHash();
  if (path === "/analytics" && view) refreshAnalytics();
  else if (path === "/") { refreshOverview(); refreshPanels($("ov-panels")); $("status").textContent = "live · updated " + new Date().toLocaleTimeString(); }
  else { refreshPanels($("detail-panels")); $("status").textContent = "live · updated " + new Date().toLocaleTimeString(); }
}

// ---- events ----

function wire() {
  $("stat").onchange = () => go({ ...view, stat: $("stat").value, by: (statInfo($("stat").value) || { dims: [""] }).dims[0], drill: "", filters: [] });
  $("by").onchange = () => go({ ...view, by: $("by").value, drill: "" });
  $("drill").onchange = () => { view.drill = $("drill").value; };
  $("range").onchange = () => go({ ...view, range: $("range").value, from: "", to: "" });
  $("live").onclick = () => go({ ...view, from: "", to: "" });
  $("filters").onclick = (e) => {
    const i = e.target.dataset.i;
    if (i === undefined) return;
    const filters = view.filters.filter((_, k) => String(k) !== i);
    go({ ...view, filters, drill: "" });
  };
  // Click a row: filter on its value and break down by the drill dimension.
  $("rows").onclick = (e) => {
    const tr = e.target.closest("tr");
    if (!tr || !tr.classList.contains("click")) return;
    const filters = view.filters.concat([`${view.by}=${tr.dataset.value}`]);
    const by = view.drill && view.drill !== view.by ? view.drill : nextDim({ ...view, filters });
    go({ ...view, filters, by, drill: "" });
  };
  $("ov").onclick = (e) => {
    const tr = e.target.closest("tr[data-href]");
    if (tr) location.hash = tr.dataset.href;
  };
  // Drag on the chart: pick a time range (then the table shows that range).
  const c = $("chart");
  c.onmousedown = (e) => { drag = { x0: e.offsetX, x1: e.offsetX }; };
  c.onmousemove = (e) => { if (drag && e.buttons) drag.x1 = e.offsetX; };
  c.onmouseup = () => {
    const geo = c._geom;
    if (!drag || !geo || Math.abs(drag.x1 - drag.x0) < 4) { drag = null; return; }
    const n = geo.times.length;
    const at = (x) => geo.times[Math.max(0, Math.min(n - 1, Math.round(((x - geo.L) / (geo.right - geo.L)) * (n - 1))))];
    const from = at(Math.min(drag.x0, drag.x1)), to = at(Math.max(drag.x0, drag.x1)) + 1;
    drag = null;
    go({ ...view, from: String(from), to: String(to) });
  };
  window.onhashchange = route;
}

async function main() {
  wire();
  try { stats = await api("/api/analytics/stats"); } catch (e) { $("status").textContent = e.message; }
  route();
  timer = setInterval(() => { if (!(view && view.from)) refresh(); }, 1000);
}

main();
