// coldcache ui: renders what the server's JSON API returns. No framework;
// all state is in the URL hash so views are shareable and the back button
// works. Aggregation, sorting and filtering happen on the server.
"use strict";
const TOKEN = new URLSearchParams(location.search).get("token") || "";
let META = null;
const $ = (sel) => document.querySelector(sel);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
// Counts with thousands separators (as people read them), ratios with one
// decimal; anything else as given.
const GROUPED = new Intl.NumberFormat("en-US");
const GROUPED1 = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const fmt = (v) => (typeof v !== "number" ? String(v) : Number.isInteger(v) ? GROUPED.format(v) : GROUPED1.format(v));
// A share of a total, as the flat table shows it beside each count.
// (none for a zero count).
const share = (x, total) => (total > 0 && x > 0 ? `${((100 * x) / total).toFixed(1)}%` : "");

function state() {
  const h = new URLSearchParams(location.hash.slice(1));
  return {
    // With two dumps the page opens on their comparison.
    view: h.get("view") || (META && META.compare ? "compare" : "flat"),
    dump: +(h.get("dump") || 0),
    by: h.get("by") || "function",
    sort: h.get("sort") || "",
    incl: h.get("incl") === "1",
    filter: h.get("filter") || "",
    fn: h.has("fn") ? +h.get("fn") : null,
    cols: h.get("cols") || "",
    weight: h.get("weight") || "",
    min: h.get("min") || "0.5",
    layout: h.get("layout") || "changes",
    node: h.get("node") || "",
    find: h.get("find") || "",
    fcmp: h.get("fcmp") === "1",
    syntax: h.get("syntax") || "",
    type: h.get("type") || "",
    // Bottom-up and callers: every caller on a row of its own, not a chain
    // of single callers folded onto one row (the default, as the CLI).
    chains: h.get("chains") === "1",
  };
}

function setState(patch) {
  const s = Object.assign(state(), patch);
  const h = new URLSearchParams();
  for (const [k, v] of Object.entries(s)) {
    if (v === null || v === "" || v === false) continue;
    h.set(k, v === true ? "1" : v);
  }
  location.hash = h.toString();
}

// The page's Content-Security-Policy applies no style="" attribute: sizes
// and shades computed here are set through the DOM (el.style), from data-
// attributes the markup carries (numbers made here, never dump text).
function applyStyles(root) {
  root.querySelectorAll("[data-width]").forEach((e) => (e.style.width = `${+e.dataset.width}px`));
  root.querySelectorAll("[data-indent]").forEach((e) => (e.style.paddingLeft = `${+e.dataset.indent}px`));
  root.querySelectorAll("[data-shade]").forEach((e) => (e.style.backgroundColor = `rgba(var(--hot), ${+e.dataset.shade})`));
}

async function api(path, params) {
  const q = new URLSearchParams(params || {});
  const t0 = performance.now();
  const r = await fetch(path + "?" + q.toString(), { headers: { "X-Coldcache-Token": TOKEN } });
  const ms = (performance.now() - t0).toFixed(0);
  $("#status").textContent = `${path} ${ms} ms`;
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function dumpMeta(s) { return META.dumps[Math.min(s.dump, META.dumps.length - 1)]; }
function columns(s) { return dumpMeta(s).columns; }
function sortName(s) { return s.sort || dumpMeta(s).default_sort; }

// Visible columns: from the URL, else the report's default.
function visibleCols(s) {
  const cols = columns(s);
  if (s.cols) {
    const want = s.cols.split(",");
    const v = cols.map((c, i) => (want.includes(c.name) ? i : -1)).filter((i) => i >= 0);
    if (v.length) return v;
  }
  // The API's default_columns (the same choice as `coldcache report`).
  const pick = dumpMeta(s).default_columns.map((n) => cols.findIndex((c) => c.name === n)).filter((i) => i >= 0);
  return pick.length ? pick : cols.map((_, i) => i);
}

function colIndex(s, name) { return columns(s).findIndex((c) => c.name === name); }

function controls(html) { $("#controls").innerHTML = html; }

function columnsMenu(s) {
  const vis = visibleCols(s);
  const items = columns(s).map((c, i) =>
    `<label title="${esc(c.description)}"><input type="checkbox" data-col="${esc(c.name)}" ${vis.includes(i) ? "checked" : ""}> ${esc(c.name)}</label>`).join("");
  return `<span class="cols" id="cols"><button id="cols-btn" data-test="columns">Columns ▾</button><span class="menu">${items}</span></span>`;
}

function wireColumns() {
  const box = $("#cols");
  if (!box) return;
  $("#cols-btn").onclick = () => box.classList.toggle("open");
  box.querySelectorAll("input[data-col]").forEach((cb) => {
    cb.onchange = () => {
      const names = [...box.querySelectorAll("input[data-col]:checked")].map((x) => x.dataset.col);
      setState({ cols: names.join(",") });
    };
  });
}

async function renderSelection(s) {
  const el = $("#selection");
  if (s.fn === null) { el.innerHTML = `<span class="muted">Click a function to select it; its source, callers and place in the tree follow it across views.</span>`; return; }
  try {
    const f = await api("/api/function", { dump: s.dump, fn: s.fn });
    const m = colIndex(s, sortName(s));
    el.innerHTML = `Selected: <span class="name" data-test="selected">${esc(f.label)}</span>
      <span class="muted">${esc(f.info.file || "")}${f.info.line ? ":" + f.info.line : ""} · self ${esc(sortName(s))} ${fmt(f.self[m])}, inclusive ${fmt(f.incl[m])}</span>
      <button data-go="source">Source</button><button data-go="asm">Disassembly</button>
      <button data-go="callers">Callers</button><button data-go="top_down">In the tree</button><button data-test="to-flame" id="to-flame">In the flame graph</button>
      ${META.compare ? f.in_dumps.map((x, i) => (x && i !== s.dump ? `<button data-dump="${i}" data-fn="${x.fn}">In ${esc(META.dumps[i].name)}</button>` : "")).join("") : ""}`;
    el.querySelectorAll("button[data-go]").forEach((b) => (b.onclick = () => setState({ view: b.dataset.go, reveal: null })));
    $("#to-flame").onclick = async () => {
      // Zoom into the function's heaviest node for the current weight.
      const cur = state();
      const v = await api("/api/flame", { dump: cur.dump, weight: flameWeight(cur), focus: cur.fn });
      setState({ view: "flame", node: v.root || null });
    };
    el.querySelectorAll("button[data-dump]").forEach((b) => (b.onclick = () => setState({ dump: +b.dataset.dump, fn: +b.dataset.fn, node: null })));
  } catch (e) { el.innerHTML = `<span class="error">${esc(e.message)}</span>`; }
}

function header(s, cols, extra, label, sortable) {
  const sn = sortName(s);
  const ths = cols.map((i) => {
    const c = columns(s)[i];
    return `<th data-sort="${esc(c.name)}" title="${esc(c.description)}" class="${c.name === sn ? "sorted" : ""}">${esc(c.name)}</th>`;
  }).join("");
  return `<tr>${extra || ""}${ths}<th class="label">${esc(label)}</th></tr>`;
}

function wireSort(root) {
  root.querySelectorAll("th[data-sort]").forEach((th) => (th.onclick = () => setState({ sort: th.dataset.sort })));
}

// ---- flat ----
async function viewFlat(s) {
  controls(`<label>rows <select id="by" data-test="by">
      ${["function", "line", "instruction"].map((b) => `<option ${b === flatBy(s) ? "selected" : ""}>${b}</option>`).join("")}</select></label>
    <label>filter <input id="filter" data-test="filter" value="${esc(s.filter)}" placeholder="regex"></label>
    <label><input type="checkbox" id="incl" ${s.incl ? "checked" : ""}> sort by inclusive</label>
    ${columnsMenu(s)}`);
  $("#by").onchange = (e) => setState({ by: e.target.value });
  let timer = null;
  $("#filter").oninput = (e) => { clearTimeout(timer); timer = setTimeout(() => setState({ filter: e.target.value }), 300); };
  $("#incl").onchange = (e) => setState({ incl: e.target.checked });
  wireColumns();
  const v = await api("/api/flat", { dump: s.dump, by: flatBy(s), sort: sortName(s), inclusive: s.incl ? 1 : 0, filter: s.filter, limit: 300 });
  const cols = visibleCols(s);
  const sc = colIndex(s, v.sort);
  // A count and its share of the column's total (ratios have no share).
  const cell = (x, i) => (columns(s)[i].ratio
    ? `<td class="num"><span class="count">${GROUPED1.format(x)}</span></td>`
    : `<td class="num"><span class="count">${fmt(x)}</span><span class="pct">${share(x, v.totals[i])}</span></td>`);
  const rows = v.rows.map((r, k) => {
    const sel = r.function === s.fn && flatBy(s) === "function" ? "selected" : "";
    const inc = r.incl ? cell(r.incl[sc], sc) : "";
    const label = esc(r.label) + (r.asm ? ` <span class="muted">${esc(r.asm)}</span>` : "");
    return `<tr class="clickable ${sel}" data-fn="${r.function}" data-row="${k}">${cols.map((i) => cell(r.self[i], i)).join("")}${inc}<td class="label" title="${esc(r.label)}">${label}</td></tr>`;
  }).join("");
  const inclHead = v.rows.length && v.rows[0].incl ? `<th>incl:${esc(v.sort)}</th>` : "";
  const total = `<tr class="total">${cols.map((i) => `<td class="num"><span class="count">${columns(s)[i].ratio ? GROUPED1.format(v.totals[i]) : fmt(v.totals[i])}</span>${columns(s)[i].ratio ? "" : `<span class="pct"></span>`}</td>`).join("")}${inclHead ? "<td></td>" : ""}<td class="label">TOTAL</td></tr>`;
  const head = header(s, cols, "", flatBy(s), true).replace(`<th class="label">`, `${inclHead}<th class="label">`);
  $("#main").innerHTML = `<table data-test="flat" data-sort="${esc(v.sort)}" data-by="${esc(v.by)}" data-filter="${esc(s.filter)}"><thead>${head}</thead><tbody>${rows}${total}</tbody></table>
    <p class="muted">${fmt(v.rows.length)} of ${fmt(v.matched)} rows · percentages of the total · sorted by ${esc(v.sort)}${v.inclusive ? " (inclusive)" : ""} · click a row to select, double-click for its source</p>`;
  wireSort($("#main"));
  $("#main").querySelectorAll("tr[data-fn]").forEach((tr) => {
    tr.onclick = () => setState({ fn: +tr.dataset.fn });
    tr.ondblclick = () => setState({ fn: +tr.dataset.fn, view: "source" });
  });
}

// ---- trees ----
const TREE = { rows: new Map(), children: new Map(), open: new Set(), unfolded: new Set(), key: "" };

function treeParams(s, kind) {
  const p = { dump: s.dump, kind, sort: sortName(s), min_percent: s.min };
  if (kind === "callers") p.fn = s.fn;
  if (kind !== "top_down" && !s.chains) p.fold = 1;
  return p;
}

function addRows(rows) {
  for (const r of rows) {
    if (!TREE.rows.has(r.key)) {
      TREE.rows.set(r.key, r);
      const list = TREE.children.get(r.parent_key) || [];
      list.push(r.key);
      TREE.children.set(r.parent_key, list);
    }
    TREE.open.add(r.parent_key);
  }
}

async function viewTree(s, kind) {
  controls(`<label>hide below <input id="min" data-test="min" size="4" value="${esc(s.min)}"> %</label>
    ${columnsMenu(s)} ${kind === "top_down" ? "" : `<label title="a chain of single callers (the same costs) is one row, 'first ← (+N) ← last', by default, as in coldcache report; click (+N) to show one chain"><input type="checkbox" id="chains" data-test="chains"${s.chains ? " checked" : ""}> every caller on its own row</label>`} <span class="muted">${kind === "top_down" ? "callers above callees, all threads" : kind === "bottom_up" ? "where costs were spent, then who called" : "the selected function, then the callers its costs came through"}</span>`);
  $("#min").onchange = (e) => setState({ min: e.target.value });
  if ($("#chains")) $("#chains").onchange = (e) => setState({ chains: e.target.checked });
  wireColumns();
  if (kind === "callers" && s.fn === null) { $("#main").innerHTML = `<p class="muted">Select a function first (Flat view).</p>`; return; }
  const key = JSON.stringify([s.dump, kind, s.fn, sortName(s), s.min, s.chains]);
  const base = treeParams(s, kind);
  if (TREE.key !== key) {
    TREE.rows = new Map(); TREE.children = new Map(); TREE.open = new Set(); TREE.unfolded = new Set(); TREE.key = key; TREE.revealed = undefined;
    const first = await api("/api/tree", Object.assign({ hot: 1 }, base));
    TREE.totals = first.totals;
    addRows(first.rows);
  }
  if (kind === "top_down" && s.fn !== null && TREE.revealed !== s.fn) {
    TREE.revealed = s.fn;
    const r = await api("/api/tree", Object.assign({ reveal: s.fn }, base));
    addRows(r.rows);
  }
  drawTree(s, kind);
}

function drawTree(s, kind) {
  const cols = visibleCols(s);
  const sc = colIndex(s, sortName(s));
  const root = kind === "top_down" ? "0" : "";
  const out = [];
  // Depth as shown: a folded chain is one row, its callers one level below.
  const walk = (pk, depth) => {
    for (const k of TREE.children.get(pk) || []) {
      const r = TREE.rows.get(k);
      const open = TREE.open.has(k) && TREE.children.has(k);
      const tw = r.has_children ? (open ? "▾" : "▸") : "";
      const sel = r.function === s.fn ? "selected" : "";
      // An inlined copy (top-down), or the caller a function was inlined
      // into (bottom-up, callers), as `coldcache report` marks them.
      const word = kind === "top_down" ? " [inlined]" : " [inlined here]";
      const mark = r.inlined ? `<span class="muted" data-test="inlined">${word}</span>` : "";
      // A chain of single callers folded onto the row (`/api/tree?fold=1`):
      // `first ← (+N) ← last`, the whole chain in the tooltip; (+N) opens it.
      const chain = r.chain || [];
      const named = (c) => `${esc(c.name)}${c.inlined ? `<span class="muted">${word}</span>` : ""}`;
      const full = [r, ...chain].map((c) => c.name + (c.inlined ? word : "")).join(" ← ");
      let tail = "";
      if (chain.length === 1 || (chain.length > 1 && TREE.unfolded.has(k))) tail = chain.map((c) => ` ← ${named(c)}`).join("");
      else if (chain.length > 1) tail = ` ← <span class="fold" data-test="fold" title="show the whole chain">(+${chain.length - 1})</span> ← ${named(chain[chain.length - 1])}`;
      if (tail) tail = `<span data-test="chain">${tail}</span>`;
      out.push(`<tr class="clickable ${sel}" data-key="${esc(k)}" data-fn="${r.function}">
        <td class="num"><span class="bar" data-width="${Math.max(1, Math.round(r.percent / 2))}"></span>${r.percent.toFixed(1)}</td>
        ${cols.map((i) => `<td class="num">${fmt(r.incl[i])}</td>`).join("")}<td class="num">${fmt(r.self[sc])}</td>
        <td class="num" data-test="calls">${r.calls === null || r.calls === undefined ? "-" : fmt(r.calls)}</td>
        <td class="label" data-indent="${(depth - 1) * 16 + 8}" title="${esc(full)}"><span class="twisty" data-test="twisty">${tw}</span><span class="fname">${esc(r.name)}</span>${mark}${tail}</td></tr>`);
      if (open) walk(k, depth + 1);
    }
  };
  walk(root, 1);
  const head = header(s, cols, `<th>%</th>`, "function", true).replace(`<th class="label">`, `<th>self:${esc(sortName(s))}</th><th title="how often these calls ran in the window (- for an inlined copy)">calls</th><th class="label">`);
  $("#main").innerHTML = `<table data-test="tree" data-kind="${kind}" data-min="${esc(s.min)}"><thead>${head}</thead><tbody>${out.join("")}</tbody></table>
    <p class="muted">inclusive columns; ▸ expands (the hottest path is open); 100% = ${fmt(TREE.totals[sc])} ${esc(sortName(s))}</p>`;
  applyStyles($("#main"));
  wireSort($("#main"));
  $("#main").querySelectorAll("tr[data-key]").forEach((tr) => {
    const k = tr.dataset.key;
    tr.querySelector(".twisty").onclick = async (ev) => {
      ev.stopPropagation();
      if (TREE.open.has(k) && TREE.children.has(k)) { TREE.open.delete(k); drawTree(state(), kind); return; }
      if (!TREE.children.has(k)) {
        const p = treeParams(state(), kind);
        if (kind === "top_down") p.node = k; else p.path = k;
        const r = await api("/api/tree", p);
        addRows(r.rows);
      }
      TREE.open.add(k);
      drawTree(state(), kind);
    };
    const fold = tr.querySelector("[data-test=fold]");
    if (fold) fold.onclick = (ev) => { ev.stopPropagation(); TREE.unfolded.add(k); drawTree(state(), kind); };
    tr.onclick = () => setState({ fn: +tr.dataset.fn });
  });
}

// ---- source and disassembly ----
async function viewSource(s) {
  controls(`${columnsMenu(s)} <span class="muted">line shading: badness (mem² / instructions); ▶ marks the worst lines</span>`);
  wireColumns();
  if (s.fn === null) { $("#main").innerHTML = `<p class="muted">Select a function first (Flat view).</p>`; return; }
  const v = await api("/api/annotate", { dump: s.dump, fn: s.fn });
  const cols = visibleCols(s);
  let max = 0;
  v.files.forEach((f) => f.lines.forEach((l) => (max = Math.max(max, l.badness))));
  const parts = v.files.map((f) => {
    const rows = f.lines.map((l) => {
      const has = l.costs.some((c) => c !== 0);
      const shade = max > 0 ? (l.badness / max) * 0.55 : 0;
      const style = shade > 0.01 ? `data-shade="${shade.toFixed(3)}"` : "";
      const inl = l.inlined.length ? ` <span class="inl">[inlined: ${esc(l.inlined.join(", "))}]</span>` : "";
      return `<tr class="${l.worst ? "worst" : ""}" ${style} data-line="${l.line}">${cols.map((i) => `<td class="num">${has ? fmt(l.costs[i]) : ""}</td>`).join("")}
        <td class="lineno">${l.worst ? "▶" : ""}${l.line}</td><td class="code">${esc(l.text ?? "")}${inl}</td></tr>`;
    }).join("");
    return `<h3>${esc(f.path || "(no line information)")} ${f.readable || !f.path ? (f.embedded ? '<span class="muted" data-test="embedded">(as captured: embedded in the dump)</span>' : "") : '<span class="muted">(source not available)</span>'}</h3>
      <table class="src" data-test="source"><thead><tr>${cols.map((i) => `<th>${esc(columns(s)[i].name)}</th>`).join("")}<th>line</th><th class="label">source</th></tr></thead><tbody>${rows}</tbody></table>`;
  }).join("");
  $("#main").innerHTML = parts || `<p class="muted">No costs in this function.</p>`;
  applyStyles($("#main"));
}

async function viewAsm(s) {
  const syntax = s.syntax === "intel" ? "intel" : "att";
  controls(`<label>syntax <select id="syntax" data-test="syntax">
      ${["att", "intel"].map((x) => `<option ${x === syntax ? "selected" : ""}>${x}</option>`).join("")}</select></label>
    ${columnsMenu(s)}`);
  $("#syntax").onchange = (e) => setState({ syntax: e.target.value === "att" ? "" : e.target.value });
  wireColumns();
  if (s.fn === null) { $("#main").innerHTML = `<p class="muted">Select a function first (Flat view).</p>`; return; }
  const v = await api("/api/asm", { dump: s.dump, fn: s.fn, syntax });
  const cols = visibleCols(s);
  // objdump's address (the file's) where the module's file tells the load
  // bias, as `coldcache report --asm` prints; the run-time one otherwise.
  const addr = (r) => (r.file_addr !== null && r.file_addr !== undefined
    ? `<td class="num" title="run-time 0x${r.addr.toString(16)}">${r.file_addr.toString(16)}</td>`
    : `<td class="num" title="run-time address (the module's file is not there)">0x${r.addr.toString(16)}</td>`);
  const rows = v.rows.map((r) => `${r.gap_before ? `<tr><td colspan="${cols.length + 3}" class="muted">…</td></tr>` : ""}
    <tr>${cols.map((i) => `<td class="num">${fmt(r.costs[i])}</td>`).join("")}${addr(r)}
    <td class="label">${esc(r.text || "(bytes unknown)")}</td><td class="label muted">${esc((r.file || "").split("/").slice(-2).join("/"))}${r.line ? ":" + r.line : ""}${r.inlined ? " [" + esc(r.inlined) + "]" : ""}</td></tr>`).join("");
  $("#main").innerHTML = `<table data-test="asm"><thead><tr>${cols.map((i) => `<th>${esc(columns(s)[i].name)}</th>`).join("")}<th>address</th><th class="label">instruction</th><th class="label">line</th></tr></thead><tbody>${rows}</tbody></table>`;
}

// ---- threads, flame graph, capture ----
async function viewThreads(s) {
  controls(columnsMenu(s));
  wireColumns();
  const v = await api("/api/threads", { dump: s.dump });
  const cols = visibleCols(s);
  const head = (l) => `<tr>${cols.map((i) => `<th>${esc(columns(s)[i].name)}</th>`).join("")}<th class="label">${l}</th></tr>`;
  const line = (vals, label) => `<tr>${cols.map((i) => `<td class="num">${fmt(vals[i])}</td>`).join("")}<td class="label">${esc(label)}</td></tr>`;
  $("#main").innerHTML = `<h3>Threads</h3><table data-test="threads">${head("thread")}${v.threads.map((t) => line(t.costs, `${t.tid} ${t.name} (core ${t.core})`)).join("")}</table>
    <h3>Simulated cores</h3><table>${head("core")}${v.cores.map((c) => line(c.costs, `core ${c.core} (threads ${c.threads.join(", ")})`)).join("")}</table>`;
}

// The flame graph: the server lays out the frames below the zoomed node
// (GET /api/flame, frames under 1/2000 of the width left out); the page
// draws them on a canvas, root at the bottom as in inferno's SVG.
const FLAME = { v: null, rows: [], hover: null };
const FLAME_ROW = 18;

function flameColor(name, matched) {
  if (matched) return "rgb(230,0,230)";
  if (/^0x[0-9a-f]+ /.test(name) || name.startsWith("[")) return "rgb(190,190,190)";
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  const u = (k) => ((h >>> k) & 255) / 255;
  return `rgb(${205 + Math.round(50 * u(0))},${Math.round(230 * u(8))},${Math.round(55 * u(16))})`;
}

function flameWeight(s) { return s.weight || dumpMeta(s).default_weight; }

async function viewFlame(s) {
  const counts = columns(s).filter((c) => !c.ratio);
  const w = flameWeight(s);
  const svg = new URLSearchParams({ dump: s.dump, weight: w, token: TOKEN });
  controls(`<label>weight <select id="weight" data-test="weight">${counts.map((c) => `<option ${c.name === w ? "selected" : ""}>${esc(c.name)}</option>`).join("")}</select></label>
    <label>search <input id="find" data-test="find" value="${esc(s.find)}" placeholder="regex"></label>
    ${META.compare ? `<label title="colour each frame by the change of its call path between the two dumps"><input type="checkbox" id="fcmp" data-test="flame-compare" ${s.fcmp ? "checked" : ""}> compare with ${esc(META.dumps[1 - Math.min(s.dump, 1)].name)}</label>` : ""}
    <button id="unzoom" data-test="unzoom" ${s.node ? "" : "disabled"}>Reset zoom</button>
    <a href="/api/flame.svg?${svg}" download="flamegraph.svg">SVG</a>
    <span class="muted">click a frame to zoom into it and select its function</span>`);
  $("#weight").onchange = (e) => setState({ weight: e.target.value });
  let timer = null;
  $("#find").oninput = (e) => { clearTimeout(timer); timer = setTimeout(() => setState({ find: e.target.value }), 300); };
  $("#unzoom").onclick = () => setState({ node: null });
  if ($("#fcmp")) $("#fcmp").onchange = (e) => setState({ fcmp: e.target.checked });
  const cmp = META.compare && s.fcmp;
  const v = await api("/api/flame", { dump: s.dump, weight: w, node: s.node || 0, compare: cmp ? 1 : 0 });
  // Compared: B − A of every frame (A = dump 0, before; B = dump 1).
  const delta = (r) => (r.other === undefined ? 0 : s.dump === 1 ? r.value - r.other : r.other - r.value);
  let re = null;
  if (s.find) { try { re = new RegExp(s.find); } catch (e) { re = null; } }
  // Rows to draw: "all", the path down to the zoomed node (full width),
  // then the frames below it.
  const name = (f) => (v.names[f.function] ?? "") + (f.inlined ? " [inlined]" : "");
  const rows = [{ node: 0, parent: null, function: null, depth: 0, start: 0, value: v.total, self: 0, other: v.other_total, label: "all", full: true }];
  for (const f of v.path) rows.push(Object.assign({ label: name(f), full: true }, f));
  for (const f of v.frames) rows.push(Object.assign({ label: name(f), full: false }, f));
  // Search: frames whose label matches, and the weight under them (a
  // match inside another match counts once).
  const byNode = new Map(rows.map((r) => [r.node, r]));
  let matched = 0;
  for (const r of rows) {
    r.match = !!(re && r.node !== 0 && re.test(r.label));
    if (!r.match || r.full) continue;
    let p = byNode.get(r.parent), inner = false;
    while (p && !p.full) { if (p.match) { inner = true; break; } p = byNode.get(p.parent); }
    if (!inner) matched += r.value;
  }
  const pathMatch = v.path.some((f) => re && re.test(name(f)));
  if (pathMatch) matched = v.root_value;
  FLAME.v = v; FLAME.rows = rows;
  FLAME.maxDelta = cmp ? Math.max(1, ...rows.filter((r) => r.node !== 0).map((r) => Math.abs(delta(r)))) : 0;
  FLAME.delta = cmp ? delta : null;
  const pct = (x, of) => (of > 0 ? ((100 * x) / of).toFixed(2) : "0.00");
  const notes = [];
  if (v.hidden_frames) notes.push(`${fmt(v.hidden_frames)} frames narrower than 1/2000 of the width left out (${fmt(v.hidden_value)} ${esc(v.weight)}, ${pct(v.hidden_value, v.root_value)}%)`);
  if (cmp) notes.push(`<span data-test="flame-legend">widths: ${esc(dumpMeta(s).name)}; <span class="more">red</span>: more in B, <span class="less">blue</span>: less in B (full colour: ±${fmt(FLAME.maxDelta)}); paths only in ${esc(META.dumps[1 - Math.min(s.dump, 1)].name)} are not drawn: switch the dump to see them</span>`);
  if (v.cut_depth !== null) notes.push(`cut at depth ${v.cut_depth} (too many frames): zoom in to see deeper`);
  $("#main").innerHTML = `<div class="flame-wrap"><canvas data-test="flame" data-root="${v.root}" data-weight="${esc(v.weight)}" data-frames="${v.frames.length}" data-find="${esc(s.find)}" data-matched="${matched}" data-compare="${cmp ? 1 : 0}"></canvas><div class="flame-tip" id="flame-tip"></div></div>
    <p class="muted">${esc(v.weight)}: ${fmt(v.root_value)} in view of ${fmt(v.total)} (${pct(v.root_value, v.total)}%)${re ? ` · <span data-test="matched">matched ${fmt(matched)} (${pct(matched, v.root_value)}% of the view)</span>` : ""}${notes.length ? " · " + notes.join(" · ") : ""}</p>`;
  const canvas = $("#main canvas");
  drawFlame(canvas, s);
  const at = (ev) => {
    const b = canvas.getBoundingClientRect();
    return flameHit(canvas, ev.clientX - b.left, ev.clientY - b.top);
  };
  const tip = $("#flame-tip");
  canvas.onmousemove = (ev) => {
    const r = at(ev);
    if (!r) { tip.style.display = "none"; canvas.style.cursor = ""; return; }
    canvas.style.cursor = "pointer";
    tip.style.display = "block";
    let cmpLine = "";
    if (cmp) {
      const [a, b] = s.dump === 1 ? [r.other, r.value] : [r.value, r.other];
      const d = b - a;
      cmpLine = `<br>A ${fmt(a)} → B ${fmt(b)}: change ${d > 0 ? "+" : ""}${fmt(d)}${a > 0 ? ` (${d > 0 ? "+" : ""}${((100 * d) / a).toFixed(1)}%)` : ""}`;
    }
    tip.innerHTML = `<b>${esc(r.label)}</b><br>${esc(v.weight)} ${fmt(r.value)} · ${pct(r.value, v.total)}% of all${r.full ? "" : ` · ${pct(r.value, v.root_value)}% of view`}<br>self ${fmt(r.self)}${cmpLine}`;
    const b = canvas.parentElement.getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - b.left + 12, b.width - 320) + "px";
    tip.style.top = ev.clientY - b.top + 14 + "px";
  };
  canvas.onmouseleave = () => (tip.style.display = "none");
  canvas.onclick = (ev) => {
    const r = at(ev);
    if (!r) return;
    if (r.node === 0) setState({ node: null });
    else setState({ node: r.node, fn: r.function });
  };
  window.onresize = () => { if (state().view === "flame" && FLAME.v === v) drawFlame(canvas, state()); };
}

// Row geometry in CSS pixels: x, width, y of a frame on a canvas `width` wide.
function flameBox(r, width) {
  const v = FLAME.v;
  const maxDepth = Math.max(v.max_depth, ...v.path.map((f) => f.depth), 0);
  const x = r.full || v.root_value === 0 ? 0 : (r.start / v.root_value) * width;
  const w = r.full ? width : (r.value / Math.max(1, v.root_value)) * width;
  return { x, w, y: (maxDepth - r.depth) * FLAME_ROW };
}

function drawFlame(canvas, s) {
  const v = FLAME.v;
  const width = canvas.parentElement.clientWidth;
  const maxDepth = Math.max(v.max_depth, ...v.path.map((f) => f.depth), 0);
  const height = (maxDepth + 1) * FLAME_ROW;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
  canvas.style.width = width + "px"; canvas.style.height = height + "px";
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.font = "11px ui-monospace, monospace";
  ctx.textBaseline = "middle";
  const cw = ctx.measureText("M").width || 7;
  for (const r of FLAME.rows) {
    const b = flameBox(r, width);
    if (b.w < 0.3) continue;
    ctx.fillStyle = r.node === 0 ? "rgb(230,230,230)" : FLAME.delta && !r.match ? diffColor(FLAME.delta(r) / FLAME.maxDelta) : flameColor(r.label, r.match);
    ctx.fillRect(b.x, b.y, Math.max(b.w - 0.5, 0.3), FLAME_ROW - 1);
    if (s.fn !== null && r.function === s.fn) {
      ctx.strokeStyle = "#1f3fbf"; ctx.lineWidth = 2;
      ctx.strokeRect(b.x + 1, b.y + 1, Math.max(b.w - 2.5, 0.5), FLAME_ROW - 3);
    }
    const fit = Math.floor((b.w - 6) / cw);
    if (fit >= 3) {
      const t = r.label.length > fit ? r.label.slice(0, fit - 1) + "…" : r.label;
      ctx.fillStyle = "#000";
      ctx.fillText(t, b.x + 3, b.y + FLAME_ROW / 2);
    }
  }
}

// A change from −1 (all of the largest drop: blue) to +1 (red); 0 is grey.
function diffColor(t) {
  const k = Math.round(225 - 145 * Math.min(1, Math.abs(t)));
  if (t > 0) return `rgb(255,${k},${k})`;
  if (t < 0) return `rgb(${k},${k},255)`;
  return "rgb(225,225,225)";
}

function flameHit(canvas, x, y) {
  const width = canvas.clientWidth;
  for (const r of FLAME.rows) {
    const b = flameBox(r, width);
    if (y >= b.y && y < b.y + FLAME_ROW && x >= b.x && x < b.x + b.w) return r;
  }
  return null;
}

function viewCapture(s) {
  controls("");
  const d = dumpMeta(s);
  const kv = (k, v) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`;
  // Each module once (a library mapped again after a dlclose is one file),
  // without coldcache's own library.
  const seen = new Set();
  let own = "";
  const modules = d.modules.filter((m) => {
    if (/(^|\/)libcoldcache\.so$/.test(m.path)) { own = m.path; return false; }
    if (seen.has(m.path)) return false;
    seen.add(m.path);
    return true;
  });
  $("#main").innerHTML = `<table class="kv" data-test="capture">
    ${kv("dump", esc(d.name))}${kv("program", esc(d.program.join(" ")))}${kv("pid", d.pid)}
    ${kv("trigger", esc(d.trigger))}${kv("threads traced", esc(d.threads_selected))}
    ${kv("instructions", fmt(d.instructions))}${kv("duration", (d.duration_ns / 1e6).toFixed(3) + " ms")}
    ${kv("cut short", esc(d.cut_short || "no"))}${kv("cache warmed", esc(d.warm || "no (cold cache)"))}${kv("thread schedule", esc(d.schedule || "as the OS ran them"))}${kv("records", fmt(d.records))}
    ${kv("cache", esc(d.cache_name) + ` (levels ${esc(d.levels.join(", "))}, ${d.cores} cores)`)}
    ${kv("unmodelled", esc(d.unmodelled.map((u) => u[0] + ": " + fmt(u[1])).join(", ") || "none"))}
    ${kv("notes", d.notes.map(esc).join("<br>") || "none")}
    ${kv("threads", d.threads.map((t) => `${t.tid} ${esc(t.name)} → core ${t.core}`).join("<br>"))}
    ${kv("modules", `<ul class="plain" data-test="capture-modules">${modules.map((m) => `<li>${esc(m.path)} <span class="muted">${esc(m.status || "unresolved")} ${esc(m.detail || "")}</span></li>`).join("")}</ul>${own ? `<span class="muted" data-test="own-library">coldcache's own library (${esc(own)}) is left out: nothing of it is counted</span>` : ""}`)}
    </table><h3>Cache configuration</h3><pre data-test="cache-toml">${esc(d.cache_toml || "(not recorded)")}</pre>`;
}

// The flat view's rows: the comparison's data rows (type, field, object)
// are not rows of a flat profile.
function flatBy(s) {
  return ["function", "line", "instruction"].includes(s.by) ? s.by : "function";
}

// ---- comparison ----
// Rows per function or line, or (`coldcache diff --by type|field|object`)
// per data type, field or object of the data view. Types and fields have
// the dump's columns, as functions; objects have columns of their own
// (blocks, bytes, accesses, reads, writes, misses per level), all shown,
// ordered by the change of the first level's misses. Only functions and
// lines have the side-by-side layout (flat profiles).
const DATA_ROWS = ["type", "field", "object"];
async function viewCompare(s) {
  if (!META.compare) { controls(""); $("#main").innerHTML = `<p class="muted">Start coldcache ui with two dumps to compare them.</p>`; return; }
  const data = DATA_ROWS.includes(s.by);
  const own = s.by === "object";
  const by = data ? s.by : s.by === "instruction" ? "function" : s.by;
  controls(`<label>rows <select id="by" data-test="compare-by">${["function", "line"].concat(DATA_ROWS).map((b) => `<option ${b === by ? "selected" : ""}>${b}</option>`).join("")}</select></label>
    ${own ? "" : `<label>ordered by the change of <select id="sort" data-test="sort">${columns(s).filter((c) => !c.ratio).map((c) => `<option ${c.name === sortName(s) ? "selected" : ""}>${esc(c.name)}</option>`).join("")}</select></label>`}
    <label>filter <input id="filter" value="${esc(s.filter)}" placeholder="regex"></label> ${own ? "" : columnsMenu(s)}
    ${data ? "" : `<label>layout <select id="layout" data-test="layout">${["changes", "side by side"].map((l) => `<option ${l === s.layout ? "selected" : ""}>${l}</option>`).join("")}</select></label>`}`);
  $("#by").onchange = (e) => setState({ by: e.target.value });
  $("#filter").onchange = (e) => setState({ filter: e.target.value });
  if (!own) {
    $("#sort").onchange = (e) => setState({ sort: e.target.value });
    wireColumns();
  }
  if (!data) {
    $("#layout").onchange = (e) => setState({ layout: e.target.value });
    if (s.layout === "side by side") return viewSideBySide(s);
  }
  const v = await api("/api/diff", { by, sort: own ? "" : sortName(s), filter: s.filter, limit: 300 });
  const names = v.columns.map((c) => c.name);
  const vis = own ? names.map((_, i) => i) : visibleCols(s).map((i) => columns(s)[i].name).filter((n) => names.includes(n)).map((n) => names.indexOf(n));
  const sc = names.indexOf(v.sort);
  const cls = (c) => (c < 0 ? "neg" : c > 0 ? "pos" : "");
  // The other columns: A above B in one cell, so that the table fits the
  // window; B is coloured when it differs.
  const ab = (a, b) => `<td class="num ab"><span class="a">${fmt(a)}</span><span class="b ${cls(b - a)}">${fmt(b)}</span></td>`;
  const rows = v.rows.map((r) => `<tr><td class="label" title="${esc(r.label)}">${esc(r.label)}</td>
      <td class="num">${fmt(r.before[sc])}</td><td class="num">${fmt(r.after[sc])}</td>
      <td class="num ${cls(r.change)}">${r.change > 0 ? "+" : ""}${fmt(r.change)}</td>
      <td class="num">${r.status !== "changed" ? r.status : r.relative === null ? "" : (r.relative > 0 ? "+" : "") + r.relative.toFixed(1) + "%"}</td>
      ${vis.filter((i) => i !== sc).map((i) => ab(r.before[i], r.after[i])).join("")}</tr>`).join("");
  const other = vis.filter((i) => i !== sc).map((i) => `<th>${esc(names[i])}<span class="ab-head">A / B</span></th>`).join("");
  $("#main").innerHTML = `<p>A = <b>${esc(META.dumps[0].name)}</b> (before), B = <b>${esc(META.dumps[1].name)}</b> (after); rows by the largest change of ${esc(v.sort)}</p>
    <table data-test="compare" data-sort="${esc(v.sort)}" data-by="${esc(data ? by : v.by)}"><thead><tr><th class="label">${esc(by)}</th><th>${esc(v.sort)} A</th><th>${esc(v.sort)} B</th><th>change</th><th>%</th>${other}</tr></thead>
    <tbody>${rows}<tr class="total"><td class="label">TOTAL</td><td class="num">${fmt(v.before_totals[sc])}</td><td class="num">${fmt(v.after_totals[sc])}</td><td></td><td></td>${vis.filter((i) => i !== sc).map((i) => ab(v.before_totals[i], v.after_totals[i])).join("")}</tr></tbody></table>`;
}

// Both dumps' flat profiles next to each other, same rows, sort and filter.
async function viewSideBySide(s) {
  const by = s.by === "instruction" ? "function" : s.by;
  const q = (d) => api("/api/flat", { dump: d, by, sort: sortName(s), filter: s.filter, limit: 100 });
  const [a, b] = await Promise.all([q(0), q(1)]);
  const cols = visibleCols(s);
  const pane = (v, d) => `<div class="pane"><h3>${"AB"[d]}: ${esc(META.dumps[d].name)}</h3>
    <table data-test="side-${d}"><thead><tr><th class="label">${esc(by)}</th>${cols.map((i) => `<th>${esc(columns(s)[i].name)}</th>`).join("")}</tr></thead>
    <tbody>${v.rows.map((r) => `<tr class="clickable" data-dump="${d}" data-fn="${r.function}"><td class="label" title="${esc(r.label)}">${esc(by === "line" ? r.label.replace(/^.*\//, "") : r.label)}</td>${cols.map((i) => `<td class="num">${fmt(r.self[i])}</td>`).join("")}</tr>`).join("")}
    <tr class="total"><td class="label">TOTAL</td>${cols.map((i) => `<td class="num">${fmt(v.totals[i])}</td>`).join("")}</tr></tbody></table></div>`;
  $("#main").innerHTML = `<div class="panes">${pane(a, 0)}${pane(b, 1)}</div>`;
  $("#main").querySelectorAll("tr[data-fn]").forEach((tr) => (tr.onclick = () => setState({ dump: +tr.dataset.dump, fn: +tr.dataset.fn, node: null })));
}

// Instructions not modelled, or run trapped in fast mode, threads left
// untraced: a row only when there are some (summary.unmodelled /
// summary.trapped / summary.untraced, in words).
function shortfall(label, f) {
  if (!f) return "";
  return `<tr><td>${label}</td><td data-test="summary-${label}" data-count="${f.count}"><span class="warn">${esc(f.text)}</span> <span class="muted">(${esc(f.advice)})</span></td></tr>`;
}

// ---- the summary (top of the flat and comparison pages) ----
// What each dump is (program, cache, window, mode) and its totals
// (instructions, misses per level), from /api/meta's `summary`; with two
// dumps simulated with different caches, `coldcache diff`'s warning first.
function summaryCard(d, i) {
  const s = d.summary;
  const w = s.window;
  const name = META.dumps.length > 1 ? `${"AB"[i] || i}: ${esc(d.name)}` : esc(d.name);
  const misses = s.misses.map((m) => `<span class="lvl" data-test="summary-miss" data-level="${esc(m.level)}"><b>${esc(m.level)}</b> <span class="d">${fmt(m.data)}</span> data, <span class="i">${fmt(m.instruction)}</span> instruction</span>`).join(" · ");
  const memory = s.memory === null ? "" : ` · <span data-test="summary-memory"><b>memory</b> <span class="m">${fmt(s.memory)}</span> <span class="muted">(served by memory)</span></span>`;
  return `<div class="card" data-test="summary" data-dump="${i}"><div class="card-title">${name}</div><table class="kv">
    <tr><td>program</td><td data-test="summary-program">${esc(s.program.join(" ") || "(not recorded)")}</td></tr>
    <tr><td>cache</td><td data-test="summary-cache">${esc(s.cache_name)} <span class="muted">(levels ${esc(s.levels.join(", "))}, ${fmt(s.cores)} core${s.cores === 1 ? "" : "s"})</span></td></tr>
    <tr><td>window</td><td data-test="summary-window" data-cut="${w.cut_short ? 1 : 0}">start: ${esc(w.started)} → stop: <span class="${w.cut_short ? "warn" : ""}">${esc(w.stopped)}</span>${w.cut_short ? "" : " (complete)"}
      <span class="muted">${w.threads ? `· threads ${esc(w.threads)} ` : ""}· ${fmt(w.duration_ns / 1e6)} ms · mode ${esc(w.mode)}</span></td></tr>
    <tr><td>instructions</td><td data-test="summary-instructions">${fmt(s.instructions)}</td></tr>
    <tr><td>misses</td><td data-test="summary-misses">${misses || `<span class="muted">(no per-level counters in this dump)</span>`}${memory}</td></tr>
    ${shortfall("unmodelled", s.unmodelled)}${shortfall("trapped", s.trapped)}${shortfall("untraced", s.untraced)}${shortfall("requests", s.client_requests)}${shortfall("woken", s.woken_early)}
  </table></div>`;
}

function renderSummary(s) {
  const el = $("#summary");
  if (s.view !== "flat" && s.view !== "compare") { el.innerHTML = ""; return; }
  const warn = META.cache_mismatch ? `<p class="warn" data-test="cache-mismatch">⚠ ${esc(META.cache_mismatch)}</p>` : "";
  el.innerHTML = `${warn}<div class="cards">${META.dumps.map(summaryCard).join("")}</div>`;
}


// ---- data types: the data view and a type's layout ----
// Shown only for a dump resolved with data types (/api/meta's
// summary.data_types, null without).
function hasData(s) { return !!dumpMeta(s).summary.data_types; }

const pctOf = (x, total) => (total > 0 ? `${((100 * x) / total).toFixed(1)}%` : "0.0%");

// The coverage line, as `coldcache report --view data` and the summary say it.
function coverageText(c) {
  return `${pctOf(c.typed, c.accesses)} of ${fmt(c.accesses)} data accesses typed, ${pctOf(c.with_field, c.accesses)} with a field (${fmt(c.typed_instructions)} of ${fmt(c.instructions)} instructions with data accesses typed)`;
}

// Line utilisation cells: lines the misses fetched into the first data
// level, and the bytes of each used on average ("" without the data).
function lineUseCells(u) {
  if (!u) return "";
  if (!u.lines_fetched) return `<td class="num" data-test="fetched">0</td><td class="num muted" data-test="used">-</td>`;
  return `<td class="num" data-test="fetched">${fmt(u.lines_fetched)}</td><td class="num" data-test="used">${u.used_per_line.toFixed(1)}</td>`;
}
function lineUseHeads(line) {
  return `<th title="lines the misses brought into the first data level">fetched</th><th title="bytes of each fetched line used, on average, before it left">used/${line}</th>`;
}

async function viewData(s) {
  controls(`<label>filter <input id="filter" data-test="filter" value="${esc(s.filter)}" placeholder="regex"></label>
    ${columnsMenu(s)} <span class="muted">which types and fields the memory accesses touched · click a row for its type's layout</span>`);
  let timer = null;
  $("#filter").oninput = (e) => { clearTimeout(timer); timer = setTimeout(() => setState({ filter: e.target.value }), 300); };
  wireColumns();
  const v = await api("/api/data", { dump: s.dump, sort: sortName(s), filter: s.filter, limit: 300 });
  const c = v.coverage;
  const cols = visibleCols(s);
  const levels = dumpMeta(s).levels;
  const cell = (x, i) => (columns(s)[i].ratio
    ? `<td class="num"><span class="count">${GROUPED1.format(x)}</span></td>`
    : `<td class="num"><span class="count">${fmt(x)}</span><span class="pct">${share(x, v.totals[i])}</span></td>`);
  const lu = !!v.total_line_use;
  const extra = `<th>%</th><th>reads</th><th>writes</th>${lu ? lineUseHeads(v.line_size) : ""}`;
  const table = (rows, kind) => {
    const body = rows.map((r) => `<tr class="clickable" data-type="${esc(r.ty)}" data-test="${kind}-row"><td class="num">${r.percent.toFixed(2)}</td><td class="num">${fmt(r.reads)}</td><td class="num">${fmt(r.writes)}</td>${lineUseCells(r.line_use)}${cols.map((i) => cell(r.costs[i], i)).join("")}<td class="label">${esc(r.label)}</td></tr>`).join("");
    const total = `<tr class="total"><td></td><td></td><td></td>${lineUseCells(v.typed_line_use)}${cols.map((i) => `<td class="num"><span class="count">${columns(s)[i].ratio ? GROUPED1.format(v.typed_totals[i]) : fmt(v.typed_totals[i])}</span></td>`).join("")}<td class="label">TOTAL of the typed instructions</td></tr>`;
    return `<table data-test="data-${kind}s" data-sort="${esc(v.sort)}"><thead>${header(s, cols, extra, kind, true)}</thead><tbody>${body}${total}</tbody></table>`;
  };
  const modules = v.modules.map((m) => `<li>types of ${esc(m.module)}: ${m.found ? esc(m.found) : `<span class="muted">(not looked at)</span>`}</li>`).join("");
  $("#main").innerHTML = `<p data-test="coverage"><b>data:</b> ${esc(coverageText(c))}</p>
    <p class="muted" data-test="coverage-detail">untyped: ${fmt(c.untyped)} (${pctOf(c.untyped, c.accesses)}) · typed through a register holding a pointer ${fmt(c.via_register)}, a global or static ${fmt(c.via_global)}, the stack frame ${fmt(c.via_stack)} · misses per level: ${esc(levels.join(", "))}</p>
    <ul class="muted" data-test="modules">${modules}</ul>
    <p class="muted" data-test="line-use">${lu ? `line utilisation: ${fmt(v.total_line_use.lines_fetched)} lines fetched into the first data level, ${v.total_line_use.used_per_line.toFixed(1)} of ${v.line_size} bytes used each before they left; by untyped instructions ${fmt(v.untyped_line_use.lines_fetched)} lines` : esc(v.line_use_note)}</p>
    <h3>Types</h3>${table(v.types, "type")}
    <p class="muted">${fmt(v.types.length)} of ${fmt(v.types_matched)} types · sorted by ${esc(v.sort)}</p>
    <h3>Fields</h3>${table(v.fields, "field")}
    <p class="muted">${fmt(v.fields.length)} of ${fmt(v.fields_matched)} fields · sorted by ${esc(v.sort)} · a field is Type::member.sub; Type::&lt;padding&gt; bytes of no member, [straddles] an operand spanning more than its field · typing is per instruction: which field, not which object</p>
    ${v.variables.length ? `<h3>Variables</h3>${table(v.variables, "variable")}
    <p class="muted">${fmt(v.variables.length)} of ${fmt(v.variables_matched)} variables · globals, and locals by the frame holding them, that instructions' operands name (accesses through a pointer are under their types and fields above)</p>` : ""}
    ${objectsHtml(v)}`;
  wireSort($("#main"));
  $("#main").querySelectorAll("tr[data-type]").forEach((tr) => (tr.onclick = () => setState({ view: "layout", type: tr.dataset.type })));
  // A site's whole allocation stack: its tooltip, and shown below the row
  // on click.
  $("#main").querySelectorAll("tr[data-test=site-row]").forEach((tr) => (tr.onclick = () => {
    const next = tr.nextElementSibling;
    if (next && next.dataset.test === "site-stack") next.classList.toggle("hidden");
  }));
}

// The objects (`record --objects`): allocation sites, then the other
// objects (mappings), as `report --view data` ends; the analysis crate
// ranks them (first-level misses, last level, accesses).
function objectsHtml(v) {
  const o = v.objects;
  if (!o) return `<h3>Objects</h3><p class="muted" data-test="objects-note">${esc(v.objects_note)}</p>`;
  // Coherence columns where any row sent an invalidation, as the CLI.
  const coherent = o.coherence && o.sites.concat(o.others).some((r) => r.invalidations > 0);
  const extra = (coherent ? 2 : 0) + (o.line_use ? 3 : 0);
  // Line utilisation (`--line-use`): over the instructions whose every
  // access is the object's, as the CLI's `fetched`, `used/line`, `of`.
  const lineUse = (r) => !o.line_use ? "" : `<td class="num" data-test="lines-fetched">${fmt(r.lines_fetched)}</td><td class="num">${r.lines_fetched ? (r.bytes_used / r.lines_fetched).toFixed(1) : "-"}</td><td class="num">${r.accesses ? pctOf(r.line_use_accesses, r.accesses) : "-"}</td>`;
  const misses = (r) => r.misses.map((m) => `<td class="num">${fmt(m)}</td>`).join("")
    + (coherent ? `<td class="num" data-test="invalidations">${fmt(r.invalidations)}</td><td class="num" data-test="false-sharing">${fmt(r.false_sharing)}</td>` : "")
    + lineUse(r);
  const heads = (first) => `<tr><th class="label">${first}</th><th class="label">allocator</th><th>blocks</th><th>bytes</th><th>accesses</th><th>reads</th><th>writes</th>${o.levels.map((l) => `<th>miss:${esc(l)}</th>`).join("")}${coherent ? "<th>invalidations</th><th>false_sharing</th>" : ""}${o.line_use ? "<th>fetched</th><th>used/line</th><th>of</th>" : ""}</tr>`;
  const site = (r) => {
    const top = r.frames.slice(r.user_frame, r.user_frame + 3).join(" ← ") || r.label;
    const stack = r.frames.map((f, i) => `${i === r.user_frame ? "▶ " : "  "}${f}`).join("\n");
    // The site's type (its instructions' types joined, `report --view
    // data`'s "allocation site types"), its fields below the stack.
    const type = r.type ? `<br><span class="muted" data-test="site-type">${esc(`${r.type} (${pctOf(r.typed_accesses, r.accesses)} of accesses typed)`)}</span>` : "";
    const fields = r.fields.map((f) => `\n  ${f.field}: ${fmt(f.accesses)} accesses (${fmt(f.reads)} reads, ${fmt(f.writes)} writes), ${f.misses.map((m, k) => `miss:${o.levels[k]} ${fmt(m)}`).join(", ")}`).join("");
    const typed = r.fields.length ? `\n\nits accesses by field (${pctOf(r.typed_accesses, r.accesses)} typed):${fields}` : "";
    return `<tr class="clickable" data-test="site-row" title="${esc(`${r.label}\n${stack}`)}"><td class="label">${esc(top)}${type}</td><td class="label">${esc(r.allocator)}</td><td class="num" data-test="blocks">${fmt(r.blocks)}</td><td class="num">${fmt(r.bytes)}</td><td class="num">${fmt(r.accesses)}</td><td class="num">${fmt(r.reads)}</td><td class="num">${fmt(r.writes)}</td>${misses(r)}</tr>
      <tr class="hidden" data-test="site-stack"><td colspan="${7 + o.levels.length + extra}"><pre>${esc(`${r.kind === "mapping" ? "mapped" : "allocated"} by ${r.allocator}, innermost frame first:\n${stack}${typed}`)}</pre></td></tr>`;
  };
  // A mapping's accesses by the type and field (or global) of the
  // instructions that made them: the heap allocated earlier, a module's
  // globals (not the stacks').
  const otherFields = (r) => r.fields.map((f) => `\n  ${f.field}: ${fmt(f.accesses)} accesses, ${f.misses.map((m, k) => `miss:${o.levels[k]} ${fmt(m)}`).join(", ")}`).join("");
  const otherType = (r) => !r.fields.length ? ""
    : r.kind === "stack frame"
      ? `<br><span class="muted" data-test="object-words">${esc(`by word: ${r.fields.slice(0, 3).map((f) => `${f.field} ${pctOf(f.accesses, r.accesses)}`).join(", ")}`)}</span>`
      : `<br><span class="muted" data-test="object-type">${esc(`${r.type || "no one type"} (${pctOf(r.typed_accesses, r.accesses)} of accesses typed): ${r.fields.slice(0, 3).map((f) => f.field).join(", ")}`)}</span>`;
  const other = (r) => `<tr data-test="object-row"><td class="label" title="${esc(`${r.label}${r.fields.length ? `\n\nits accesses by field:${otherFields(r)}` : ""}`)}">${esc(`${r.kind}: ${r.label}`)}${otherType(r)}</td><td class="label"></td><td class="num"></td><td class="num">${r.kind === "global" ? fmt(r.bytes) : ""}</td><td class="num">${fmt(r.accesses)}</td><td class="num">${fmt(r.reads)}</td><td class="num">${fmt(r.writes)}</td>${misses(r)}</tr>`;
  const notFollowed = (o.unknown_frees + o.unreturned + o.untracked > 0
    ? `<p class="warn" data-test="objects-not-followed">not followed: ${fmt(o.unknown_frees)} frees of blocks allocated earlier, ${fmt(o.unreturned)} allocator calls not seen returning, ${fmt(o.untracked)} allocations not tracked (table full)</p>` : "")
    + (o.not_per_slot > 0 ? `<p class="warn" data-test="objects-not-per-slot">${fmt(o.not_per_slot)} accesses of stack frames not kept by slot (the capture's limit on slots, or more than 1 GiB below their frame's CFA): in their frames' rows, none of their locals'</p>` : "");
  return `<h3>Objects</h3>
    <p data-test="objects-head">${fmt(o.accesses)} data accesses, ${pctOf(o.in_blocks, o.accesses)} in heap blocks allocated in the capture${o.in_mappings ? `, ${pctOf(o.in_mappings, o.accesses)} in mappings made in it (outside blocks)` : ""}; ${fmt(o.allocations)} allocations and ${fmt(o.frees)} frees seen (${fmt(o.allocators)} allocator entry points observed), ${fmt(o.live)} blocks live at the end</p>${notFollowed}
    <table data-test="objects-sites"><thead>${heads("allocation site (top frames; click for the whole stack)")}</thead><tbody>${o.sites.length ? o.sites.map(site).join("") : `<tr><td class="label muted" colspan="${7 + o.levels.length + extra}">(no allocation seen in the capture)</td></tr>`}</tbody></table>
    <p class="muted">heap blocks by the call stack that allocated them, ranked by misses (first level, then last, then accesses)</p>
    <table data-test="objects-others"><thead>${heads("other object (a module's global, else the mapping at the capture's start)")}</thead><tbody>${o.others.map(other).join("")}</tbody></table>
    <p class="muted">an access counts once, in the object holding its first byte, at the level that served it (as the code views count it); miss:X = accesses served below X${o.line_use ? "; fetched, used/line: first-level data lines the object's accesses fetched and the bytes of each used while it stayed, over the instructions whose every access is the object's (of: their share of its accesses)" : ""}${coherent ? "; invalidations: coherence invalidations its accesses sent to other cores, false_sharing: of those, where the other core had touched only other bytes of the line" : ""}</p>`;
}

// A member's declaration as pahole writes it.
function memberDecl(m) {
  const name = m.base ? "<ancestor>" : m.bit_size > 0 ? `${m.name}:${m.bit_size}` : m.name;
  return `${m.type_name} ${name};`;
}

async function viewLayout(s) {
  controls(`<button id="to-data" data-test="to-data">← Data</button>
    <label>type <input id="type" data-test="type" value="${esc(s.type)}" placeholder="Entity or game::Entity"></label>`);
  $("#to-data").onclick = () => setState({ view: "data" });
  $("#type").onchange = (e) => setState({ type: e.target.value });
  if (!s.type) { $("#main").innerHTML = `<p class="muted">Name a type, or click one in the Data view.</p>`; return; }
  const v = await api("/api/layout", { dump: s.dump, type: s.type });
  const line = Math.max(1, v.line_size);
  const counts = (m) => (m.reads + m.writes === 0
    ? `<td class="num muted">.</td><td class="num muted">.</td>${v.levels.map(() => `<td class="num muted">.</td>`).join("")}`
    : `<td class="num">${fmt(m.reads)}</td><td class="num">${fmt(m.writes)}</td>${m.misses.map((x) => `<td class="num">${fmt(x)}</td>`).join("")}`);
  const blank = `<td></td><td></td>${v.levels.map(() => "<td></td>").join("")}`;
  const rows = [];
  const note = (text, cls, test) => rows.push(`<tr class="${cls}" data-test="${test}">${blank}<td></td><td></td><td class="code">${esc(text)}</td></tr>`);
  const indent = (d) => "    ".repeat(d + 1);
  const kw = { struct: "struct", class: "class", union: "union" }[v.kind] || "";
  note(`${kw ? kw + " " : ""}${v.name} {${v.decl ? `  /* ${v.decl} */` : ""}`, "", "layout-open");
  let last = 0, holes = 0, holeBytes = 0, sum = 0, top = 0;
  let after = [];
  const flush = () => { for (const [t, cls, test] of after) note(t, cls, test); after = []; };
  v.members.forEach((m, k) => {
    const ind = indent(m.depth);
    if (m.depth === 0) {
      flush();
      const c = Math.floor(m.offset / line);
      if (c > last) {
        const ago = m.offset - c * line;
        note(`${ind}/* --- cacheline ${c} boundary (${c * line} bytes)${ago ? ` was ${ago} bytes ago` : ""} --- */`, "boundary", "boundary");
        last = c;
      }
    }
    const pos = m.bit_size > 0 ? `${m.offset}:${m.bit_offset}` : `${m.offset}`;
    rows.push(`<tr class="member" data-test="member" data-path="${esc(m.path)}">${counts(m)}<td class="num">${pos}</td><td class="num">${fmt(m.size)}</td><td class="code">${esc(ind + memberDecl(m))}</td></tr>`);
    m.code.forEach((c, j) => {
      const at = c.file ? `${c.function} ${c.file.split("/").pop()}:${c.line}` : c.function;
      rows.push(`<tr class="site ${j >= 3 ? "hidden" : ""}" data-member="${k}" data-test="site">${blank}<td></td><td></td><td class="code muted">${esc(`${ind}    /* ${at}: ${c.accesses} accesses, ${c.misses} ${v.levels[0] || ""} misses */`)}</td></tr>`);
    });
    if (m.code.length > 3) rows.push(`<tr class="clickable more-sites" data-more="${k}">${blank}<td></td><td></td><td class="code muted">${esc(`${ind}    /* and ${m.code.length - 3} more source lines: click to show */`)}</td></tr>`);
    if (m.depth === 0) {
      top += 1; sum += m.size;
      const end = m.offset + m.size;
      const c = Math.floor(Math.max(0, end - 1) / line);
      if (c > last && m.size > 0) { after.push([`${ind}/* --- cacheline ${c} boundary (${c * line} bytes) was ${end - c * line} bytes ago --- */`, "boundary", "boundary"]); last = c; }
      if (m.hole_after > 0) { holes += 1; holeBytes += m.hole_after; after.push([`${ind}/* XXX ${m.hole_after} bytes hole, try to pack */`, "hole", "hole"]); }
    }
  });
  flush();
  if (v.other.reads + v.other.writes > 0) rows.push(`<tr data-test="other">${counts(v.other)}<td></td><td></td><td class="code">${esc("    /* accesses naming no member: padding, the whole object */")}</td></tr>`);
  note(`    /* size: ${v.size}, cachelines: ${Math.ceil(v.size / line)}, members: ${top} */`, "", "layout-size");
  if (holes) note(`    /* sum members: ${sum}, holes: ${holes}, sum holes: ${holeBytes} */`, "hole", "layout-holes");
  if (v.padding > 0) note(`    /* padding: ${v.padding} */`, "hole", "layout-padding");
  rows.push(`<tr class="total">${counts(v.total)}<td></td><td></td><td class="code">};</td></tr>`);
  const missHeads = v.levels.map((l) => `<th>miss:${esc(l)}</th>`).join("");
  // The cache lines, with the flags.
  const first = v.levels[0] || "the first level";
  const lines = v.lines.map((l) => {
    let flags = "";
    if (l.hot) flags += ` <span class="flag" data-test="hot-field" title="${esc(`${l.hot.field} gets ${l.hot.share.toFixed(1)}% of the line's ${l.reads + l.writes} accesses and misses ${first} on ${l.hot.misses} of its ${l.hot.accesses}; it uses ${l.hot.bytes} of the line's ${l.end - l.start} bytes`)}">HOT FIELD IN A COLD LINE: ${esc(l.hot.field)}</span>`;
    if (l.false_sharing.length) {
      const tids = [...new Set(l.false_sharing.map((f) => f.tid))];
      flags += ` <span class="flag" data-test="false-sharing">FALSE SHARING? threads ${esc(tids.join(", "))}</span>`;
    }
    const who = l.false_sharing.length
      ? `<div class="muted">${esc(l.false_sharing.map((f) => `thread ${f.tid} (${f.thread}) ${f.field} ${f.reads}r/${f.writes}w`).join("; "))}</div>` : "";
    const hot = l.hot ? `<div class="muted">${esc(`${l.hot.field} gets ${l.hot.share.toFixed(1)}% of the line's ${l.reads + l.writes} accesses and misses ${first} on ${l.hot.misses} of its ${l.hot.accesses}; it uses ${l.hot.bytes} of the line's ${l.end - l.start} bytes`)}</div>` : "";
    return `<tr class="${l.hot || l.false_sharing.length ? "flagged" : ""}" data-test="line" data-line="${l.index}"><td class="num">${l.index}</td><td class="num">${l.start}-${Math.max(l.start, l.end - 1)}</td><td class="num">${fmt(l.reads)}</td><td class="num">${fmt(l.writes)}</td>${l.misses.map((x) => `<td class="num">${fmt(x)}</td>`).join("")}${lineUseCells(l.line_use)}<td class="label">${esc(l.members.join(", "))}${flags}${hot}${who}</td></tr>`;
  }).join("");
  $("#main").innerHTML = `<p data-test="layout-head">type <b>${esc(v.name)}</b>: ${fmt(v.size)} bytes; cache lines of ${fmt(v.line_size)} bytes (${esc(v.line_size_from)}), the object assumed to start on a line boundary</p>
    <table class="layout" data-test="layout"><thead><tr><th>reads</th><th>writes</th>${missHeads}<th>offset</th><th>size</th><th class="label">layout</th></tr></thead><tbody>${rows.join("")}</tbody></table>
    <h3>Cache lines</h3>
    <table data-test="layout-lines"><thead><tr><th>line</th><th>bytes</th><th>reads</th><th>writes</th>${missHeads}${v.total.line_use ? lineUseHeads(v.line_size) : ""}<th class="label">members and flags</th></tr></thead><tbody>${lines}</tbody></table>
    <p class="muted">Counts are the typed instructions' (an access counts to the line holding its first byte; a member's, every access whose member path goes through it).
    HOT FIELD IN A COLD LINE: one field gets at least 90% of the line's accesses, misses ${esc(first)} on at least 10% of them, and covers less than half of the line's bytes: the rest of the line is fetched for it.
    FALSE SHARING?: one thread writes a field of the line and another thread accesses another field; typing is per instruction, so whether the threads touch the same object is not known.</p>`;
  $("#main").querySelectorAll("tr[data-more]").forEach((tr) => (tr.onclick = () => {
    $("#main").querySelectorAll(`tr.site[data-member="${tr.dataset.more}"]`).forEach((r) => r.classList.remove("hidden"));
    tr.remove();
  }));
}

// ---- frame ----
const VIEWS = ["flat", "top_down", "bottom_up", "callers", "source", "asm", "threads", "flame", "capture", "compare", "data", "layout"];
async function render() {
  const s = state();
  document.querySelectorAll("#tabs a").forEach((a) => a.classList.toggle("active", a.dataset.view === s.view || (s.view === "layout" && a.dataset.view === "data")));
  $("#tab-compare").classList.toggle("disabled", !META.compare);
  $("#tab-data").classList.toggle("disabled", !hasData(s));
  $("#dumps").innerHTML = META.dumps.length > 1
    ? `dump <select id="dump" data-test="dump">${META.dumps.map((d, i) => `<option value="${i}" ${i === s.dump ? "selected" : ""}>${"AB"[i] || i}: ${esc(d.name)}</option>`).join("")}</select>`
    : esc(META.dumps[0].name);
  const ds = $("#dump");
  if (ds) ds.onchange = (e) => setState({ dump: +e.target.value, fn: null, node: null });
  renderSummary(s);
  renderSelection(s);
  try {
    switch (s.view) {
      case "top_down": case "bottom_up": case "callers": await viewTree(s, s.view); break;
      case "source": await viewSource(s); break;
      case "asm": await viewAsm(s); break;
      case "threads": await viewThreads(s); break;
      case "flame": await viewFlame(s); break;
      case "capture": viewCapture(s); break;
      case "compare": await viewCompare(s); break;
      case "data": await viewData(s); break;
      case "layout": await viewLayout(s); break;
      case "flat": await viewFlat(s); break;
      default:
        controls("");
        $("#main").innerHTML = `<p class="error" data-test="unknown-view">There is no view “${esc(s.view)}”: the views are ${VIEWS.map((v) => `<a href="#view=${v}">${v}</a>`).join(", ")}.</p>`;
    }
  } catch (e) {
    $("#main").innerHTML = `<p class="error" data-test="error">${esc(e.message)}</p>`;
  }
}

async function main() {
  document.querySelectorAll("#tabs a").forEach((a) => (a.onclick = (e) => { e.preventDefault(); setState({ view: a.dataset.view }); }));
  try {
    META = await api("/api/meta", {});
  } catch (e) {
    $("#main").innerHTML = `<p class="error">${esc(e.message)}</p>`;
    return;
  }
  window.addEventListener("hashchange", render);
  render();
}
main();
