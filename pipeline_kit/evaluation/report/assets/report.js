// kit report: the page's script (pipeline_kit/evaluation/report). Plain JS, no library. It runs before the browser
// has read the problems' texts (the blocks after this script): it draws the tables and the problem list from the
// small index blocks, and decodes a problem's texts only when that problem is opened.
"use strict";
(function () {
  const PAGE = 25; // problems per page
  const LONG = 2000; // characters past which a generation starts folded
  const FLAG = { timeout: 1, error: 2, judgeRight: 4, judged: 8, truncated: 16 };
  const meta = JSON.parse(document.getElementById("kit-meta").textContent);
  const app = document.getElementById("app");
  const indexes = new Map(); // "side-bench" -> problems
  const texts = new Map(); // "side-bench-problem" -> [[generation, thinking] per run], the last few opened
  const state = { side: 0, bench: 0, filters: new Set(), query: "", inTexts: false, sort: "file", page: 0, open: new Set() };
  let textHits = null; // problem numbers whose texts match state.query (search in texts), null: not asked
  let searchToken = 0;

  // ------------------------------------------------------------------------------------------------ small helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  const fmt = (v, digits) => (v === null || v === undefined ? "-" : Number(v).toFixed(digits));
  const pct = (v) => fmt(v, 2) + "%";

  // a block: JSON, gzip, base64 (report/__init__.py's _block); the element may not be parsed yet
  function blockText(id) {
    const node = document.getElementById(id);
    if (node) return Promise.resolve(node.textContent);
    return new Promise((resolve, reject) => {
      const retry = () => {
        const n = document.getElementById(id);
        if (n) resolve(n.textContent);
        else if (document.readyState !== "loading") reject(new Error("no block " + id));
        else setTimeout(retry, 50);
      };
      retry();
    });
  }
  async function inflate(id) {
    const b64 = await blockText(id);
    let bytes;
    if (Uint8Array.fromBase64) bytes = Uint8Array.fromBase64(b64); // newer browsers: native and faster
    else {
      const bin = atob(b64);
      bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  async function problemsOf(side, bench) {
    const key = side + "-" + bench;
    if (!indexes.has(key)) indexes.set(key, inflate("kit-index-" + key));
    return indexes.get(key);
  }
  async function textsOf(side, bench, i) {
    const key = side + "-" + bench + "-" + i;
    if (!texts.has(key)) {
      texts.set(key, inflate("kit-text-" + key));
      if (texts.size > 40) texts.delete(texts.keys().next().value); // keep memory to the few opened last
    }
    return texts.get(key);
  }

  // ------------------------------------------------------------------------------------------------ summary tables
  function metricsTable(b) {
    const head = ["evaluation_mode", "num_entries", "avg_tokens", "gen_seconds", ...b.columns, "no_answer"];
    const rows = b.rows.map((mode) => {
      const v = b.metrics[mode];
      const cells = [
        el("td", { text: mode }),
        el("td", { "data-col": "num_entries", text: String(v.num_entries) }),
        el("td", { "data-col": "avg_tokens", text: fmt(v.avg_tokens, 0) }),
        el("td", { "data-col": "gen_seconds", text: fmt(v.gen_seconds, 2) }),
      ];
      for (const col of b.columns) {
        let text = pct(v[col]);
        if (v[col + "_std"] !== undefined && b.n > 1) text += " ± " + fmt(v[col + "_std"], 2);
        cells.push(el("td", { "data-col": col, text }));
      }
      cells.push(el("td", { "data-col": "no_answer", text: pct(v.no_answer) }));
      return el("tr", { "data-mode": mode }, cells);
    });
    return el("table", { class: "metrics", "data-bench": b.name },
      el("thead", {}, el("tr", {}, head.map((h) => el("th", { text: h })))), el("tbody", {}, rows));
  }

  function chart(b) {
    // pass@k and majority@k (symbolic_correct) against k; the greedy accuracy as a dashed line
    if (b.n < 1) return null;
    const W = 460, H = 220, L = 40, R = 12, T = 10, B = 30;
    const series = [["pass", "#3a62c9"], ["majority", "#d9822b"]].map(([kind, color]) => ({
      kind, color, values: Array.from({ length: b.n }, (_, i) => b.metrics[kind + "@" + (i + 1)].symbolic_correct),
    }));
    const greedy = b.metrics.greedy ? b.metrics.greedy.symbolic_correct : null;
    const all = series.flatMap((s) => s.values).concat(greedy === null ? [] : [greedy]);
    let lo = Math.max(0, Math.floor(Math.min(...all) / 10) * 10), hi = Math.min(100, Math.ceil(Math.max(...all) / 10) * 10);
    if (hi - lo < 10) { lo = Math.max(0, hi - 10); hi = lo + 10; }
    const x = (k) => L + (b.n === 1 ? (W - L - R) / 2 : ((k - 1) / (b.n - 1)) * (W - L - R));
    const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("width", W);
    const add = (tag, attrs, text) => {
      const n = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      svg.append(n);
      return n;
    };
    const tick = [1, 2, 5, 10, 20, 25].find((d) => (hi - lo) / d <= 6);
    for (let t = lo; t <= hi + 1e-9; t += tick) {
      add("line", { class: "grid", x1: L, x2: W - R, y1: y(t), y2: y(t) });
      add("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end" }, t.toFixed(0));
    }
    const step = Math.max(1, Math.ceil(b.n / 12));
    for (let k = 1; k <= b.n; k += step) add("text", { x: x(k), y: H - B + 16, "text-anchor": "middle" }, String(k));
    add("text", { x: (L + W - R) / 2, y: H - 2, "text-anchor": "middle" }, "k (samples)");
    add("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B });
    add("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B });
    if (greedy !== null)
      add("line", { x1: L, x2: W - R, y1: y(greedy), y2: y(greedy), stroke: "#8a93a2", "stroke-dasharray": "5 4" });
    for (const s of series) {
      const pts = s.values.map((v, i) => `${x(i + 1)},${y(v)}`).join(" ");
      add("polyline", { points: pts, fill: "none", stroke: s.color, "stroke-width": 2, "data-series": s.kind });
      if (b.n <= 32) s.values.forEach((v, i) => {
        add("circle", { cx: x(i + 1), cy: y(v), r: 2.5, fill: s.color }).append(
          Object.assign(document.createElementNS(ns, "title"), { textContent: `${s.kind}@${i + 1}: ${v.toFixed(2)}%` }));
      });
    }
    const legend = el("div", { class: "legend" },
      el("span", { style: "--c:#3a62c9", text: "pass@k" }), el("span", { style: "--c:#d9822b", text: "majority@k" }),
      greedy === null ? null : el("span", { style: "--c:#8a93a2", text: "greedy" }),
      el("span", { class: "muted", text: "symbolic_correct (%)" }));
    return el("div", { class: "chart" }, svg, legend);
  }

  function summarySection() {
    // B's benchmark of the same name, or the one B has when each folder has one (meta.pairs)
    const inB = (name) => meta.pairs[name] || name;
    const paired = new Set(Object.values(meta.pairs));
    const names = [...new Set(meta.sides.flatMap((s, i) => s.benchmarks.map((b) => b.name).filter((n) => !(i && paired.has(n)))))];
    const sec = el("section", { id: "summary" }, el("h2", { text: "Summary" }));
    for (const name of names) {
      sec.append(el("h3", { text: inB(name) === name ? name : `${name} (B: ${inB(name)})` }));
      const grid = el("div", { class: "sides", style: "--sides:" + meta.sides.length });
      meta.sides.forEach((side, s) => {
        const b = side.benchmarks.find((x) => x.name === (s ? inB(name) : name));
        const col = el("div", { "data-side": s });
        if (meta.sides.length > 1) col.append(el("div", { class: "side-label", text: (s ? "B: " : "A: ") + side.label }));
        if (!b) col.append(el("p", { class: "muted", text: "not in this folder" }));
        else col.append(metricsTable(b), el("div", { class: "notes" }, b.notes.map((n) => el("div", { text: n }))), chart(b) || "");
        grid.append(col);
      });
      sec.append(grid);
    }
    return sec;
  }

  // ------------------------------------------------------------------------------------------------ comparison
  function flipRow(name, f) {
    const b = meta.sides[0].benchmarks.findIndex((x) => x.name === name);
    return el("div", { class: "flip", "data-id": f.id || "", "data-a": f.a },
      el("span", { class: "pid", text: f.id || "#" + (f.a + 1) }),
      el("span", { class: "ptext", title: f.problem, text: f.problem }),
      el("span", { text: `A: ${f.a_correct[0]}/${f.a_correct[1]} right` }),
      el("span", { text: `B: ${f.b_correct[0]}/${f.b_correct[1]} right` }),
      el("button", { text: "open", onclick: () => openProblem(0, b, f.a) }));
  }
  function compareSection() {
    const [a, b] = meta.sides;
    const sec = el("section", { id: "changes" }, el("h2", { text: `Changes: A (${a.label}) → B (${b.label})` }),
      el("p", { class: "muted", text: "A problem's verdict is that of its majority answer over the seeds (the greedy " +
        "run's where there are no seeds), as majority@k takes it." }));
    for (const [name, c] of Object.entries(meta.compare)) {
      sec.append(el("h3", { text: name }));
      if (c.data_warning) sec.append(el("p", { class: "data-warning", text: c.data_warning }));
      if (!c.matched_by) {
        sec.append(el("p", { class: "muted", text: "no id or problem text to match the two folders' problems by" }));
        continue;
      }
      const extra = [c.only_a ? `${c.only_a} only in A` : "", c.only_b ? `${c.only_b} only in B` : ""].filter(Boolean);
      sec.append(el("p", { class: "muted", text: `${c.common} problems in both, matched by ${c.matched_by}` +
        (extra.length ? "; " + extra.join(", ") : "") }));
      for (const [way, label] of [["fixed", "wrong in A, right in B"], ["broken", "right in A, wrong in B"]]) {
        const list = el("div", { class: "flips", "data-bench": name, "data-way": way },
          c[way].length ? c[way].map((f) => flipRow(name, f)) : el("p", { class: "muted", text: "none" }));
        sec.append(el("details", { open: true }, el("summary", { text: `${label}: ${c[way].length}` }), list));
      }
    }
    return sec;
  }

  // ------------------------------------------------------------------------------------------------ problem browser
  const FILTERS = [
    ["wrong", "wrong by every run", (s) => s.every((x) => !x[1])],
    ["noanswer", "a run has no answer", (s) => s.some((x) => x[0] === null)],
    ["disagree", "runs disagree", (s) => s.some((x) => x[1]) && s.some((x) => !x[1])],
    ["timeout", "grading timed out", (s) => s.some((x) => x[4] & FLAG.timeout)],
    ["judge", "judge disagrees", (s) => s.some((x) => x[4] & FLAG.judged && !!(x[4] & FLAG.judgeRight) !== x[1])],
    ["error", "generation failed", (s) => s.some((x) => x[4] & FLAG.error)],
  ];
  const present = (p) => p.samples.filter((x) => x !== null);
  const rightShare = (p) => { const s = present(p); return s.length ? s.filter((x) => x[1]).length / s.length : 0; };
  const meanTokens = (p) => { const t = present(p).map((x) => x[2] || 0); return t.length ? t.reduce((a, b) => a + b, 0) / t.length : 0; };
  const SORTS = [
    ["file", "in file order", null],
    ["hardest", "fewest runs right first", (p) => rightShare(p)],
    ["easiest", "most runs right first", (p) => -rightShare(p)],
    ["longest", "most tokens first", (p) => -meanTokens(p)],
  ];

  function matches(p, i) {
    const s = present(p);
    for (const [key, , test] of FILTERS) if (state.filters.has(key) && !test(s)) return false;
    if (!state.query) return true;
    const q = state.query.toLowerCase();
    if ([p.id, p.problem, p.expected, ...s.map((x) => x[0] || "")].some((t) => t.toLowerCase().includes(q))) return true;
    return state.inTexts && textHits !== null && textHits.has(i);
  }

  async function searchTexts() {
    // decode each problem's texts in turn (not kept) and note those that contain the query (about 40 ms a problem
    // of 64 runs of 8k tokens: decoding, not matching, is the cost)
    const token = ++searchToken, side = state.side, bench = state.bench;
    const pattern = new RegExp(state.query.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i");
    const b = meta.sides[side].benchmarks[bench];
    textHits = new Set();
    for (let i = 0; i < b.problems; i++) {
      const runs = await inflate(`kit-text-${side}-${bench}-${i}`);
      if (token !== searchToken) return;
      if (runs.some((r) => r && ((r[0] && pattern.test(r[0])) || (r[1] && pattern.test(r[1]))))) textHits.add(i);
      if (i % 20 === 19 || i === b.problems - 1) {
        document.getElementById("search-progress").textContent = `searched the texts of ${i + 1} of ${b.problems} problems`;
        await renderList();
      }
    }
  }

  function browserSection() {
    const sideSel = meta.sides.length > 1 ? el("select", { id: "side", onchange: (e) => { state.side = +e.target.value; state.bench = 0; reset(); } },
      meta.sides.map((s, i) => el("option", { value: i, text: (i ? "B: " : "A: ") + s.label }))) : null;
    const benchSel = el("select", { id: "bench", onchange: (e) => { state.bench = +e.target.value; reset(); } });
    const controls = el("div", { class: "controls" }, sideSel, benchSel,
      FILTERS.map(([key, label]) => el("label", {}, el("input", { type: "checkbox", "data-filter": key, onchange: (e) => {
        e.target.checked ? state.filters.add(key) : state.filters.delete(key);
        state.page = 0;
        renderList();
      } }), " " + label)),
      el("input", { type: "search", id: "query", placeholder: "search id, problem, answers", oninput: (e) => {
        state.query = e.target.value.trim();
        state.page = 0;
        textHits = null;
        searchToken++;
        if (state.inTexts && state.query) searchTexts();
        renderList();
      } }),
      el("label", {}, el("input", { type: "checkbox", id: "in-texts", onchange: (e) => {
        state.inTexts = e.target.checked;
        textHits = null;
        searchToken++;
        if (state.inTexts && state.query) searchTexts();
        renderList();
      } }), " also in generations"),
      el("span", { id: "search-progress", class: "muted" }),
      el("label", {}, "sort ", el("select", { id: "sort", onchange: (e) => { state.sort = e.target.value; state.page = 0; renderList(); } },
        SORTS.map(([key, label]) => el("option", { value: key, text: label })))));
    return el("section", { id: "problems" }, el("h2", { text: "Problems" }), controls,
      el("div", { class: "status", id: "status" }), el("div", { id: "list" }), el("div", { class: "pager", id: "pager" }));
  }

  function fillBenchSelect() {
    const sel = document.getElementById("bench");
    sel.replaceChildren(...meta.sides[state.side].benchmarks.map((b, i) => el("option", { value: i, text: b.name })));
    sel.value = state.bench;
    const judged = meta.sides[state.side].benchmarks[state.bench].columns.includes("judge_correct");
    document.querySelector('[data-filter="judge"]').parentElement.style.display = judged ? "" : "none";
  }

  function reset() {
    state.page = 0;
    state.open.clear();
    textHits = null;
    searchToken++;
    document.getElementById("search-progress").textContent = "";
    fillBenchSelect();
    if (state.inTexts && state.query) searchTexts();
    return renderList();
  }

  async function renderList() {
    const side = state.side, bench = state.bench;
    const b = meta.sides[side].benchmarks[bench];
    const problems = await problemsOf(side, bench);
    if (side !== state.side || bench !== state.bench) return;
    const shown = [];
    problems.forEach((p, i) => { if (matches(p, i)) shown.push(i); });
    const order = SORTS.find(([key]) => key === state.sort)[2];
    if (order) {
      const value = new Map(shown.map((i) => [i, order(problems[i])]));
      shown.sort((a, b) => value.get(a) - value.get(b) || a - b); // ties keep the file order
    }
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const first = state.page * PAGE;
    document.getElementById("status").textContent =
      `${shown.length} of ${problems.length} problems` + (shown.length ? `; ${first + 1}-${Math.min(first + PAGE, shown.length)} shown` : "") +
      `; runs: ${b.runs.length === 1 ? b.runs[0] : b.runs[0] + " … " + b.runs[b.runs.length - 1] + " (" + b.runs.length + ")"}`;
    const list = document.getElementById("list");
    list.replaceChildren(...shown.slice(first, first + PAGE).map((i) => problemView(b, problems[i], i)));
    list.dataset.shown = JSON.stringify(shown.map((i) => problems[i].id || "#" + (i + 1)));
    document.getElementById("pager").replaceChildren(
      el("button", { text: "‹ previous", disabled: state.page === 0, onclick: () => { state.page--; renderList(); } }),
      el("span", { text: `page ${state.page + 1} of ${pages}` }),
      el("button", { text: "next ›", disabled: state.page >= pages - 1, onclick: () => { state.page++; renderList(); } }));
  }

  function problemView(b, p, i) {
    const s = present(p);
    const right = s.filter((x) => x[1]).length;
    const strip = el("div", { class: "strip" }, p.samples.map((x, r) => x === null ? null : el("span", {
      class: "cell " + (x[0] === null ? "none" : x[1] ? "right" : "wrong") + (x[4] & FLAG.timeout ? " timeout" : ""),
      title: `${b.runs[r]}: ${x[0] === null ? "no answer" : x[0]} (${x[1] ? "right" : "wrong"})`,
    })));
    const body = el("div", { class: "body" });
    const box = el("div", { class: "problem", "data-id": p.id || "#" + (i + 1), "data-index": i });
    const toggle = () => {
      if (state.open.has(i)) { state.open.delete(i); body.remove(); }
      else {
        state.open.add(i);
        box.append(body);
        fillBody(b, p, i, body);
        history.replaceState(null, "", `#problem=${state.side}:${state.bench}:${i}`); // a link to this problem
      }
    };
    box.append(el("div", { class: "head", onclick: toggle },
      el("span", { class: "muted", text: "#" + (i + 1) }), el("span", { class: "pid", title: p.id, text: p.id || "-" }),
      el("span", { class: "ptext", text: p.problem || "(no problem text)" }),
      el("span", { class: "pexp", title: "expected answer", text: p.expected }),
      el("span", { class: "count", text: `${right}/${s.length}` }), strip));
    if (state.open.has(i)) { box.append(body); fillBody(b, p, i, body); }
    return box;
  }

  function splitThinking(text) {
    // a trace inline in the generation: "<think> … </think> answer"
    const end = text.lastIndexOf("</think>");
    if (end < 0) return [null, text];
    return [text.slice(0, end).replace(/^\s*<think>/, ""), text.slice(end + 8)];
  }

  function textBlock(label, text, cls, open) {
    const d = el("details", { class: "text " + cls, open: open || null }, el("summary", { text: `${label} (${text.length.toLocaleString()} characters)` }));
    const fill = () => { if (!d.querySelector("pre")) d.append(el("pre", { text })); };
    if (open) fill();
    d.addEventListener("toggle", () => { if (d.open) fill(); });
    return d;
  }

  async function fillBody(b, p, i, body) {
    const votes = new Map();
    for (const x of present(p)) votes.set(x[0], [(votes.get(x[0]) || [0])[0] + 1, x[1]]);
    const tally = [...votes].sort((a, b) => b[1][0] - a[1][0]).map(([answer, [count, right]]) =>
      el("span", { class: "vote " + (answer === null ? "" : right ? "right" : "wrong") }, `${answer === null ? "(no answer)" : answer} ×${count}`));
    body.replaceChildren(el("div", { class: "full", text: p.problem }),
      el("div", {}, el("b", { text: "expected answer: " }), p.expected || "-"),
      el("div", { class: "votes" }, el("b", { text: "answers: " }), tally));
    const table = el("table", { class: "samples" }, el("thead", {}, el("tr", {},
      ["run", "answer", "verdict", "tokens", "seconds", "", "generation"].map((h) => el("th", { text: h })))));
    const tbody = el("tbody");
    table.append(tbody);
    body.append(table);
    const cells = [];
    p.samples.forEach((x, r) => {
      if (x === null) return;
      const tags = [];
      if (x[4] & FLAG.timeout) tags.push("grading timed out");
      if (x[4] & FLAG.error) tags.push("generation failed");
      if (x[4] & FLAG.truncated) tags.push("thinking cut short");
      if (x[4] & FLAG.judged) tags.push("judge: " + (x[4] & FLAG.judgeRight ? "right" : "wrong"));
      const gen = el("td", { class: "gen", text: "…" });
      cells.push([r, gen]);
      tbody.append(el("tr", { "data-run": b.runs[r] }, el("td", { text: b.runs[r] }),
        el("td", { text: x[0] === null ? "(no answer)" : x[0] }),
        el("td", { class: "verdict " + (x[1] ? "right" : "wrong"), text: x[1] ? "right" : "wrong" }),
        el("td", { class: "num", text: x[2] === null ? "-" : String(x[2]) }),
        el("td", { class: "num", text: fmt(x[3], 2) }),
        el("td", {}, tags.map((t) => el("span", { class: "tag", text: t }))), gen));
    });
    try {
      const runs = await textsOf(state.side, state.bench, i);
      for (const [r, gen] of cells) {
        const [generation, thinking] = runs[r] || [null, null];
        const [inline, answer] = splitThinking(generation || "");
        const trace = thinking || inline;
        gen.replaceChildren(
          trace ? textBlock("thinking", trace, "thinking", false) : "",
          generation === null ? el("span", { class: "muted", text: "(no generation)" }) :
            textBlock("generation", answer, "generation", answer.length <= LONG));
      }
    } catch (e) {
      for (const [, gen] of cells) gen.textContent = "the texts could not be read: " + e.message;
    }
  }

  function openProblem(side, bench, i) {
    state.side = side;
    state.bench = bench;
    state.filters.clear();
    document.querySelectorAll("[data-filter]").forEach((c) => { c.checked = false; });
    state.query = "";
    document.getElementById("query").value = "";
    state.sort = "file";
    document.getElementById("sort").value = "file";
    if (document.getElementById("side")) document.getElementById("side").value = side;
    return reset().then(() => {
      state.page = Math.floor(i / PAGE);
      state.open.add(i);
      return renderList();
    }).then(() => {
      const box = document.querySelector(`.problem[data-index="${i}"]`);
      if (box) box.scrollIntoView();
    });
  }

  // ------------------------------------------------------------------------------------------------ the page
  const paths = meta.sides.map((s, i) => (meta.sides.length > 1 ? (i ? "B: " : "A: ") : "") + s.path).join("   ");
  const navLinks = [["#summary", "Summary"], ...(meta.sides.length > 1 ? [["#changes", "Changes"]] : []), ["#problems", "Problems"]];
  app.replaceChildren(
    el("header", { class: "top" }, el("h1", { text: document.title }),
      el("div", { class: "paths", text: `${paths}   (made ${meta.created})` }),
      el("nav", { class: "sections" }, navLinks.map(([href, text]) => el("a", { href, text })))),
    el("main", {}, summarySection(), meta.sides.length > 1 ? compareSection() : null, browserSection()));
  fillBenchSelect();
  const link = /^#problem=(\d+):(\d+):(\d+)$/.exec(location.hash); // a link to a problem (see problemView)
  const linked = link && meta.sides[+link[1]] && meta.sides[+link[1]].benchmarks[+link[2]] ? link.slice(1).map(Number) : null;
  (linked ? openProblem(...linked) : renderList()).then(() => {
    window.kitReportReady = performance.now(); // the tests read it: when the page became usable
    document.documentElement.dataset.ready = "1";
  });
})();
