// End-to-end tests of `coldcache ui` in a real browser (Debian's chromium,
// driven by playwright-core). Run by scripts/ui-tests.sh, which starts the
// server on two dumps (before and after the pushbuffer fix) and passes:
//   COLDCACHE_UI_URL   the URL the server printed (with its token)
//   SCREENSHOTS        directory for the screenshots
//   COLDCACHE_BIN      the coldcache binary, and
//   DUMP_A, DUMP_B     the two dumps served: the counts the page shows are
//                      checked against `coldcache report` of each
// Each step checks what the page shows against what the API answers (the
// API is checked against the analysis crate by the Rust tests) or what the
// CLI prints.
import { launch } from "./browser.mjs";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";

const url = process.env.COLDCACHE_UI_URL;
const shots = process.env.SCREENSHOTS || "screenshots";
assert.ok(url, "COLDCACHE_UI_URL is not set");
mkdirSync(shots, { recursive: true });
const origin = new URL(url).origin;
const token = new URL(url).searchParams.get("token");

const { browser, page, errors } = await launch();
const step = async (name, fn) => {
  const t0 = Date.now();
  await fn();
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
  console.log(`ok   ${name} (${Date.now() - t0} ms)`);
};
const cellTexts = (sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent.trim()));
const num = (s) => Number(String(s).replace(/[^0-9.\-]/g, ""));
// Counts as the page must show them: with thousands separators.
const grouped = (n) => new Intl.NumberFormat("en-US").format(n);
const grouped1 = (x) => new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 }).format(x);

// The truth for counts (the server runs with --whole-stack, so does the
// CLI here): the dumps' totals as `coldcache report` prints
// them (its JSON: columns, totals, rows), its header (program, cache,
// notes), and whether `coldcache diff` warns that the caches differ.
const bin = process.env.COLDCACHE_BIN;
const dumps = [process.env.DUMP_A, process.env.DUMP_B];
assert.ok(bin && dumps[0] && dumps[1], "COLDCACHE_BIN, DUMP_A and DUMP_B must be set");
const cli = (...args) => execFileSync(bin, args, { encoding: "utf8" });
const reports = dumps.map((d) => {
  const j = JSON.parse(cli("report", d, "--json", "--limit", "1000", "--whole-stack"));
  const total = Object.fromEntries(j.columns.map((c, i) => [c.name, j.totals[i]]));
  const text = cli("report", d, "--limit", "1", "--whole-stack");
  const line = (k) => (text.match(new RegExp(`^${k}:\\s+(.*)$`, "m")) || [])[1];
  return { json: j, total, program: line("program"), cache: line("cache"), mode: ((line("window") || "").match(/\bmode (\w+)/) || [])[1] || "trap",
    shortfall: { unmodelled: line("unmodelled"), trapped: line("trapped") } };
});
const cliDiff = cli("diff", dumps[0], dumps[1], "--limit", "1", "--whole-stack");

// The summary of dump `i` on the page equals what the CLI says of it.
async function checkSummary(i) {
  const r = reports[i];
  const card = `[data-test=summary][data-dump='${i}']`;
  await page.waitForSelector(card);
  assert.equal(await page.textContent(`${card} [data-test=summary-program]`), r.program);
  assert.equal(await page.textContent(`${card} [data-test=summary-cache]`), r.cache);
  const win = await page.textContent(`${card} [data-test=summary-window]`);
  assert.match(win, /start: entry to run_frames → stop: run_frames returned \(complete\)/);
  assert.match(win, new RegExp(`mode ${r.mode}\\b`));
  assert.equal(await page.textContent(`${card} [data-test=summary-instructions]`), grouped(r.total.instructions));
  assert.ok(r.total.instructions >= 1000, "a count that needs a separator");
  const levels = await page.$$eval(`${card} [data-test=summary-miss]`, (els) => els.map((e) => [e.dataset.level, e.querySelector(".d").textContent, e.querySelector(".i").textContent]));
  assert.deepEqual(levels, ["L1", "L2"].map((l) => [l, grouped(r.total[`d_miss_${l}`]), grouped(r.total[`i_miss_${l}`])]));
  assert.equal(await page.textContent(`${card} [data-test=summary-memory] .m`), grouped(r.total.mem));
  // Unmodelled and trapped instructions: the header's words, or no row
  // when the header has no such line.
  for (const k of ["unmodelled", "trapped"]) {
    const said = r.shortfall[k];
    const row = await page.$(`${card} [data-test=summary-${k}]`);
    if (said === undefined) assert.equal(row, null, `${k}: a row the header has not`);
    else assert.equal(await page.textContent(`${card} [data-test=summary-${k}] .warn`), said);
  }
}

try {
  await step("01-flat", async () => {
    // Two dumps open on the comparison (trees.mjs checks it): the flat
    // view is asked for.
    const resp = await page.goto(`${url}#view=flat`);
    // The token is in the URL: no Referer may carry it anywhere, and only
    // the page's own script (by its hash) runs.
    assert.equal(resp.headers()["referrer-policy"], "no-referrer");
    assert.match(resp.headers()["content-security-policy"], /script-src 'sha256-[^']+';/);
    await page.waitForSelector("table[data-test=flat] tbody tr");
    const labels = await cellTexts("table[data-test=flat] tbody tr td.label");
    assert.ok(labels.includes("build_push_buffer"), labels.join(","));
    assert.equal(labels.at(-1), "TOTAL");
  });

  await step("01a-summary", async () => {
    // The default page starts with both dumps' summaries; their caches are
    // the same (`coldcache diff` does not warn), so the page does not.
    await checkSummary(0);
    await checkSummary(1);
    assert.doesNotMatch(cliDiff, /different caches/);
    assert.equal(await page.$("[data-test=cache-mismatch]"), null);
  });

  await step("01b-flat-total-and-percentages", async () => {
    // Every count of the flat table is the report's, with separators; the
    // TOTAL row is the report's totals; beside each count its share of the
    // total (to one decimal), and none beside ratios.
    const r = reports[0];
    // Which columns are ratios (no share of a total): the API's meta.
    const meta = await (await page.request.get(`${origin}/api/meta?token=${token}`)).json();
    const isRatio = new Map(meta.dumps[0].columns.map((c) => [c.name, c.ratio]));
    const table = await page.$$eval("table[data-test=flat]", ([t]) => {
      const heads = [...t.querySelectorAll("thead th")].map((th) => th.dataset.sort || th.textContent.trim());
      const rows = [...t.querySelectorAll("tbody tr")].map((tr) => [...tr.children].map((td) => ({
        count: td.querySelector(".count")?.textContent ?? td.textContent.trim(),
        pct: td.querySelector(".pct")?.textContent ?? null,
      })));
      return { heads, rows };
    });
    const countCols = table.heads.map((h, k) => [h, k]).filter(([h]) => h in r.total);
    assert.ok(countCols.length >= 5, table.heads.join(","));
    const total = table.rows.at(-1);
    assert.equal(total.at(-1).count, "TOTAL");
    for (const [h, k] of countCols) {
      const ratio = isRatio.get(h);
      const want = ratio ? grouped1(r.total[h]) : grouped(r.total[h]);
      assert.equal(total[k].count, want, `TOTAL ${h}`);
    }
    const byName = new Map(r.json.rows.map((x) => [x.label, x]));
    let checked = 0;
    for (const row of table.rows.slice(0, -1)) {
      const cli = byName.get(row.at(-1).count);
      assert.ok(cli, `row ${row.at(-1).count} is in the report`);
      for (const [h, k] of countCols) {
        const ci = r.json.columns.findIndex((c) => c.name === h);
        if (isRatio.get(h)) { assert.equal(row[k].pct, null, `no share beside ${h}`); continue; }
        const v = cli.self[ci];
        assert.equal(row[k].count, grouped(v), `${row.at(-1).count} ${h}`);
        const t = r.total[h];
        assert.equal(row[k].pct, t > 0 && v > 0 ? `${((100 * v) / t).toFixed(1)}%` : "", `${row.at(-1).count} ${h} share`);
        checked++;
      }
    }
    assert.ok(checked > 10, `${checked} counts checked`);
    // The hot function's instructions need a separator.
    assert.ok(table.rows.some((row) => /^\d{1,3}(,\d{3})+$/.test(row[countCols[0][1]].count)));
  });

  await step("02-sort-by-instructions", async () => {
    await page.click("table[data-test=flat] th[data-sort=instructions]");
    await page.waitForSelector("table[data-test=flat][data-sort=instructions] th.sorted[data-sort=instructions]");
    const idx = await page.$$eval("table[data-test=flat] thead th", (ths) => ths.findIndex((t) => t.dataset.sort === "instructions"));
    const vals = (await page.$$eval(`table[data-test=flat] tbody tr:not(.total) td:nth-child(${idx + 1}) .count`, (tds) => tds.map((t) => t.textContent))).map(num);
    assert.ok(vals.length > 3);
    for (let i = 1; i < vals.length; i++) assert.ok(vals[i - 1] >= vals[i], `not sorted: ${vals}`);
  });

  await step("03-filter", async () => {
    await page.fill("input[data-test=filter]", "push");
    await page.waitForSelector("table[data-test=flat][data-filter=push]");
    await page.waitForFunction(() => [...document.querySelectorAll("table[data-test=flat] tbody tr:not(.total) td.label")].every((td) => /push/.test(td.textContent)));
    const labels = await cellTexts("table[data-test=flat] tbody tr:not(.total) td.label");
    assert.deepEqual(labels, ["build_push_buffer"]);
  });

  await step("04-select", async () => {
    await page.click("table[data-test=flat] tbody tr[data-fn]");
    await page.waitForSelector("[data-test=selected]");
    assert.equal(await page.textContent("[data-test=selected]"), "build_push_buffer");
  });

  await step("05-source", async () => {
    await page.click("#selection button[data-go=source]");
    await page.waitForSelector("table[data-test=source] tr.worst");
    const worst = await cellTexts("table[data-test=source] tr.worst td.code");
    assert.ok(worst.some((t) => t.includes("flags & VISIBLE")), worst.join(" | "));
    // The flag line is the most shaded one.
    const shaded = await page.$$eval("table[data-test=source] tbody tr", (trs) => trs.map((tr) => [tr.querySelector("td.code").textContent, parseFloat((tr.getAttribute("style") || "").split(",").pop()) || 0]));
    shaded.sort((a, b) => b[1] - a[1]);
    assert.ok(shaded[0][0].includes("flags & VISIBLE"), JSON.stringify(shaded.slice(0, 3)));
    // `coldcache record` embedded the source: the text shown is the dump's.
    await page.waitForSelector("[data-test=embedded]");
  });

  await step("06-asm", async () => {
    await page.click("#tabs a[data-view=asm]");
    await page.waitForSelector("table[data-test=asm] tbody tr");
    const text = await page.textContent("table[data-test=asm]");
    // AT&T syntax, as `objdump -d` prints the flag test (`testb $0x1,0xb0(%rax)`).
    assert.match(text, /testb\s+\$0x1,/);
    // objdump's addresses (the file's, bare hex), as `report --asm` prints:
    // the example's binary is there to tell the load bias.
    const addrs = await cellTexts("table[data-test=asm] tbody td.num[title^='run-time 0x']");
    assert.ok(addrs.length > 0 && addrs.every((a) => /^[0-9a-f]+$/.test(a)), addrs.join(" "));
    // Intel syntax on request.
    await page.selectOption("[data-test=syntax]", "intel");
    await page.waitForFunction(() => /test\s+byte ptr/.test(document.querySelector("table[data-test=asm]")?.textContent || ""));
    await page.selectOption("[data-test=syntax]", "att");
    await page.waitForFunction(() => /testb\s/.test(document.querySelector("table[data-test=asm]")?.textContent || ""));
  });

  await step("07-top-down", async () => {
    await page.click("#tabs a[data-view=top_down]");
    await page.waitForSelector("table[data-test=tree][data-kind=top_down] tbody tr");
    // The hot path is open down to build_push_buffer, which is selected.
    const names = await cellTexts("table[data-test=tree] tbody td.label .fname");
    assert.ok(names.includes("build_push_buffer"), names.join(","));
    assert.ok(await page.$("table[data-test=tree] tr.selected"));
  });

  await step("08-collapse", async () => {
    // Collapse main (the hot path is open below it), then open it again.
    const rows = () => page.$$eval("table[data-test=tree] tbody tr", (t) => t.length);
    const before = await rows();
    const mainRow = page.locator("table[data-test=tree] tbody tr", { hasText: "main" }).first();
    await mainRow.locator(".twisty").click();
    await page.waitForFunction((n) => document.querySelectorAll("table[data-test=tree] tbody tr").length < n, before);
    await mainRow.locator(".twisty").click();
    await page.waitForFunction((n) => document.querySelectorAll("table[data-test=tree] tbody tr").length === n, before);
  });

  await step("09-bottom-up-expand", async () => {
    // Bottom-up with nothing hidden: run_frames' own cost is a second root,
    // collapsed; opening it asks the server for its callers.
    await page.click("#tabs a[data-view=bottom_up]");
    await page.waitForSelector("table[data-test=tree][data-kind=bottom_up]");
    await page.fill("input[data-test=min]", "0");
    await page.press("input[data-test=min]", "Enter");
    await page.waitForSelector("table[data-test=tree][data-kind=bottom_up][data-min='0'] tbody tr");
    const first = await page.textContent("table[data-test=tree] tbody tr td.label .fname");
    assert.match(first, /build_push_buffer/);
    const before = (await page.$$("table[data-test=tree] tbody tr")).length;
    const closed = page.locator("table[data-test=tree] tbody tr .twisty", { hasText: "▸" }).first();
    await closed.click();
    await page.waitForFunction((n) => document.querySelectorAll("table[data-test=tree] tbody tr").length > n, before);
  });

  await step("09b-bottom-up-chain", async () => {
    // Issue 36: the chain of single callers above run_frames (whole stack:
    // main … _start) is one row, `run_frames ← (+3) ← _start`, as the
    // CLI's text prints it folded; its tooltip is the CLI's line.
    const text = cli("report", dumps[0], "--whole-stack", "--view", "bottom-up", "--columns", "mem", "--min-percent", "0");
    const folded = await page.$$eval("table[data-test=tree] tbody tr", (trs) => trs
      .filter((tr) => tr.querySelector("[data-test=chain]"))
      .map((tr) => ({ key: tr.dataset.key, title: tr.querySelector("td.label").title, shown: tr.querySelector("td.label").textContent })));
    const chain = folded.find((r) => /^run_frames ← main ← .* ← _start$/.test(r.title));
    assert.ok(chain, JSON.stringify(folded));
    for (const r of folded) assert.ok(text.split("\n").some((l) => l.endsWith(`  ${r.title}`)), `${r.title} in\n${text}`);
    const n = chain.title.split(" ← ").length - 2;
    assert.equal(chain.shown.trim(), `run_frames ← (+${n}) ← _start`);
    // (+N) opens that one chain in place.
    const row = page.locator(`table[data-test=tree] tbody tr[data-key="${chain.key}"]`);
    await row.locator("[data-test=fold]").click();
    await page.waitForFunction((k) => !document.querySelector(`table[data-test=tree] tbody tr[data-key="${k}"] [data-test=fold]`), chain.key);
    assert.equal((await row.locator("td.label").textContent()).trim(), chain.title);
    // The control: every caller on its own row (one level each, the hot
    // path opened through them).
    await page.click("input[data-test=chains]"); // a click re-renders the controls: no check()
    await page.waitForFunction(() => !document.querySelector("table[data-test=tree] [data-test=chain]")
      && [...document.querySelectorAll("table[data-test=tree] .fname")].some((e) => e.textContent === "_start"));
    await page.click("input[data-test=chains]");
    await page.waitForSelector("table[data-test=tree] [data-test=chain]");
  });

  await step("10-callers", async () => {
    await page.click("#tabs a[data-view=callers]");
    await page.waitForFunction(() => document.querySelectorAll("table[data-test=tree][data-kind=callers] tbody tr").length >= 2);
    const names = await cellTexts("table[data-test=tree] tbody td.label .fname");
    assert.equal(names[0], "build_push_buffer");
    assert.equal(names[1], "run_frames");
  });

  await step("11-threads", async () => {
    await page.click("#tabs a[data-view=threads]");
    await page.waitForSelector("table[data-test=threads] tr td.label");
  });

  await step("12-flame", async () => {
    await page.click("#tabs a[data-view=flame]");
    await page.waitForSelector("canvas[data-test=flame][data-root='0']");
    // The frames drawn are the API's: the hot function is there, and its
    // box on the canvas is where a click lands.
    const hot = await page.evaluate(() => {
      const r = FLAME.rows.find((x) => x.label === "build_push_buffer");
      const b = flameBox(r, document.querySelector("canvas[data-test=flame]").clientWidth);
      return { node: r.node, fn: r.function, x: b.x + b.w / 2, y: b.y + 9, value: r.value };
    });
    assert.ok(hot.value > 0);
    const canvas = await page.$("canvas[data-test=flame]");
    await canvas.hover({ position: { x: hot.x, y: hot.y } });
    await page.waitForSelector("#flame-tip:has-text('build_push_buffer')");
    await page.screenshot({ path: `${shots}/12-flame-whole.png` });
    // Click: zoom into that frame and select its function.
    await canvas.click({ position: { x: hot.x, y: hot.y } });
    await page.waitForSelector(`canvas[data-test=flame][data-root='${hot.node}']`);
    assert.equal(await page.textContent("[data-test=selected]"), "build_push_buffer");
    const z = await page.evaluate(() => ({ rv: FLAME.v.root_value, top: FLAME.v.path.at(-1).function }));
    assert.equal(z.rv, hot.value);
    assert.equal(z.top, hot.fn);
    // Search marks matching frames and sums their weight.
    await page.click("[data-test=unzoom]");
    await page.waitForSelector("canvas[data-test=flame][data-root='0']");
    await page.fill("input[data-test=find]", "push_buffer");
    await page.waitForSelector("canvas[data-test=flame][data-find=push_buffer]");
    const matched = num(await page.getAttribute("canvas[data-test=flame]", "data-matched"));
    assert.equal(matched, hot.value);
    // Compared with the fixed build: the hot function's misses are mostly
    // gone, drawn blue, and the tooltip gives both sides.
    await page.fill("input[data-test=find]", "");
    await page.waitForSelector("canvas[data-test=flame][data-find='']");
    await page.check("input[data-test=flame-compare]");
    await page.waitForSelector("canvas[data-test=flame][data-compare='1']");
    const cmp = await page.evaluate(() => {
      const r = FLAME.rows.find((x) => x.label === "build_push_buffer");
      const b = flameBox(r, document.querySelector("canvas[data-test=flame]").clientWidth);
      return { a: r.value, b: r.other, x: b.x + b.w / 2, y: b.y + 9, colour: diffColor(FLAME.delta(r) / FLAME.maxDelta) };
    });
    assert.equal(cmp.a, hot.value);
    assert.ok(cmp.b > 0 && cmp.b < cmp.a / 4, `after ${cmp.b}, before ${cmp.a}`);
    assert.match(cmp.colour, /^rgb\(\d+,\d+,255\)$/);
    await page.hover("canvas[data-test=flame]", { position: { x: cmp.x, y: cmp.y } });
    await page.waitForSelector(`#flame-tip:has-text('change -${grouped(cmp.a - cmp.b)}')`);
    await page.screenshot({ path: `${shots}/12-flame-compare.png` });
    await page.uncheck("input[data-test=flame-compare]");
    await page.waitForSelector("canvas[data-test=flame][data-compare='0']");
    // "In the flame graph" zooms into the selected function's heaviest node.
    await page.click("[data-test=to-flame]");
    await page.waitForSelector(`canvas[data-test=flame][data-root='${hot.node}']`);
    // Another weight redraws from the server.
    await page.selectOption("select[data-test=weight]", "instructions");
    await page.waitForSelector("canvas[data-test=flame][data-weight=instructions]");
  });

  await step("13-capture", async () => {
    await page.click("#tabs a[data-view=capture]");
    await page.waitForSelector("[data-test=cache-toml]");
    assert.match(await page.textContent("[data-test=cache-toml]"), /\[\[level\]\]/);
  });

  await step("14-compare", async () => {
    await page.click("#tabs a[data-view=compare]");
    await page.waitForSelector("table[data-test=compare] tbody tr");
    await page.selectOption("#controls select#by", "line");
    await page.waitForFunction(() => location.hash.includes("by=line"));
    await page.selectOption("#controls select#sort", "mem");
    // Wait for the table of this query (not the one drawn before it).
    await page.waitForSelector("table[data-test=compare][data-sort=mem][data-by=line]");
    const labels = (await cellTexts("table[data-test=compare] tbody tr td.label")).slice(0, 2).sort();
    assert.ok(labels.every((l) => /pushbuffer\.c:(59|61)$/.test(l)), labels.join(","));
    const change = num(await page.textContent("table[data-test=compare] tbody tr td:nth-child(4)"));
    assert.ok(change < -4000, `change ${change}`);
  });

  await step("14b-side-by-side", async () => {
    await page.selectOption("#controls select#layout", "side by side");
    await page.waitForSelector("table[data-test=side-0] tbody tr");
    await page.waitForSelector("table[data-test=side-1] tbody tr");
    const a = await cellTexts("table[data-test=side-0] tbody tr td.label");
    const b = await cellTexts("table[data-test=side-1] tbody tr td.label");
    assert.ok(a.length > 1 && b.length > 1);
    assert.match(a[0], /pushbuffer\.c:(59|61)/);
    await page.screenshot({ path: `${shots}/14b-side-by-side-panes.png` });
    await page.selectOption("#controls select#layout", "changes");
    await page.waitForSelector("table[data-test=compare]");
  });

  await step("14d-compare-by-field", async () => {
    // The data view's rows compare too (`coldcache diff --by field`): the
    // dump's columns, no side-by-side layout.
    await page.selectOption("#controls select#by", "field");
    await page.waitForSelector("table[data-test=compare][data-by=field] tbody tr");
    assert.equal(await page.textContent("table[data-test=compare] thead th.label"), "field");
    assert.equal(await page.$("#controls select#layout"), null);
    assert.notEqual(await page.$("#controls select#sort"), null);
    const labels = await cellTexts("table[data-test=compare] tbody tr td.label");
    assert.ok(labels.some((l) => l.includes("::") || l.includes("(")), labels.join(","));
    await page.screenshot({ path: `${shots}/14d-compare-by-field.png` });
  });

  await step("14c-compare-summary-and-width", async () => {
    // The comparison starts with both summaries, and its table fits a
    // 1400-pixel window with the default columns (no horizontal scroll).
    await page.setViewportSize({ width: 1400, height: 900 });
    await page.selectOption("#controls select#by", "function");
    await page.fill("#controls input#filter", "");
    await page.press("#controls input#filter", "Enter");
    await page.waitForSelector("table[data-test=compare][data-by=function] tbody tr");
    await page.waitForFunction(() => !location.hash.includes("filter="));
    await checkSummary(0);
    await checkSummary(1);
    assert.equal(await page.$("[data-test=cache-mismatch]"), null);
    const fit = await page.evaluate(() => {
      const t = document.querySelector("table[data-test=compare]");
      return { right: t.getBoundingClientRect().right, cols: t.querySelectorAll("thead th").length, inner: window.innerWidth, scroll: document.documentElement.scrollWidth };
    });
    assert.equal(fit.inner, 1400);
    assert.ok(fit.cols >= 10, `${fit.cols} columns`);
    assert.ok(fit.right <= fit.inner, `the table's right edge at ${fit.right} px`);
    assert.ok(fit.scroll <= fit.inner, `the page scrolls to ${fit.scroll} px`);
    // The other columns give A above B; the TOTAL row the report's totals.
    const tot = await page.$$eval("table[data-test=compare] tr.total td.ab", (tds) => tds.map((td) => [td.querySelector(".a").textContent, td.querySelector(".b").textContent]));
    assert.ok(tot.some(([a, b]) => a === grouped(reports[0].total.instructions) && b === grouped(reports[1].total.instructions)), JSON.stringify(tot));
  });

  await step("15-shared-url", async () => {
    // A shared URL opens the same view with the same selection.
    const shared = page.url().replace(/view=compare/, "view=source");
    const other = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await other.goto(shared);
    await other.waitForSelector("table[data-test=source] tr.worst");
    assert.equal(await other.textContent("[data-test=selected]"), "build_push_buffer");
    await other.close();
  });

  // Refusals.
  let r = await page.request.get(`${origin}/api/meta`);
  assert.equal(r.status(), 403, "a request without the token");
  r = await page.request.get(`${origin}/?token=wrong${token.slice(5)}`);
  assert.equal(r.status(), 403, "a wrong token");
  r = await page.request.get(`${origin}/api/source?token=${token}&file=/etc/passwd`);
  assert.equal(r.status(), 403, "a file outside the dump's sources");
  console.log("ok   refusals (no token, wrong token, /etc/passwd)");
  assert.deepEqual(errors, [], "page errors");
} catch (e) {
  await page.screenshot({ path: `${shots}/failure.png` });
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
