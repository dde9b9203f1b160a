// The trees and pages a new user reads (issue 36; run by scripts/ui-tests.sh
// on two captures of tests-programs/symbols/inlined_getter.cpp):
// - with two dumps the page opens on their comparison;
// - an unknown #view= says so, naming the views;
// - the callers tree of the getter marks the caller it was inlined into and
//   shows the calls, as `coldcache report --callers --json` does, each
//   caller with its one caller on its row as the CLI's text (`← frame`),
//   or every caller on its own row at the user's choice; the
//   top-down tree starts at the captured function;
// - long names are cut with an ellipsis, the whole name in a tooltip;
// - the Capture page lists each module once, and not libcoldcache.so.
// Environment: COLDCACHE_UI_URL, SCREENSHOTS, COLDCACHE_BIN, DUMP_A, DUMP_B.
import { launch } from "./browser.mjs";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";

const url = process.env.COLDCACHE_UI_URL;
const shots = process.env.SCREENSHOTS || "screenshots";
const bin = process.env.COLDCACHE_BIN;
const dump = process.env.DUMP_A;
assert.ok(url && bin && dump, "COLDCACHE_UI_URL, COLDCACHE_BIN and DUMP_A must be set");
mkdirSync(shots, { recursive: true });
const cli = (...args) => JSON.parse(execFileSync(bin, args, { encoding: "utf8" }));

// The truth: the CLI's callers tree of the getter and its top-down tree.
const callers = cli("report", dump, "--callers", "GetPosition", "--json");
const getter = callers.rows.find((r) => r.depth === 1);
const cliCallers = callers.rows.filter((r) => r.depth === 2);
assert.ok(cliCallers.some((r) => r.inlined) && cliCallers.some((r) => !r.inlined), "an inlined and a called copy");
const topDown = cli("report", dump, "--view", "top-down", "--json");

const { browser, page, errors } = await launch();
const step = async (name, f) => {
  try {
    await f();
    await page.screenshot({ path: `${shots}/${name}.png` });
    console.log(`ok   ${name}`);
  } catch (e) {
    await page.screenshot({ path: `${shots}/${name}-failure.png` });
    throw e;
  }
};
try {
  await page.setViewportSize({ width: 1400, height: 900 });
  await step("30-opens-on-compare", async () => {
    await page.goto(url);
    await page.waitForSelector("table[data-test=compare]");
    assert.ok(await page.$("#tabs a[data-view=compare].active"), "the Compare tab is the active one");
  });

  await step("31-unknown-view", async () => {
    await page.goto(`${url}#view=nonsense`);
    await page.waitForSelector("[data-test=unknown-view]");
    const t = await page.textContent("[data-test=unknown-view]");
    assert.match(t, /no view “nonsense”/);
    assert.match(t, /top_down/);
    assert.equal(await page.$("table[data-test=flat]"), null, "no flat view in its place");
  });

  await step("32-callers-inlined", async () => {
    await page.goto(`${url}#view=callers&fn=${getter.function}&min=0`);
    await page.waitForFunction((n) => document.querySelectorAll("table[data-test=tree][data-kind=callers] tbody tr").length >= n, 1 + cliCallers.length);
    const rows = await page.$$eval("table[data-test=tree] tbody tr", (trs) => trs.map((tr) => ({
      name: tr.querySelector(".fname").textContent,
      inlined: !!tr.querySelector("[data-test=inlined]"),
      calls: tr.querySelector("[data-test=calls]").textContent,
    })));
    assert.equal(rows[0].name, getter.name);
    for (const c of cliCallers) {
      const r = rows.find((x) => x.name === c.name && x.inlined === c.inlined);
      assert.ok(r, `${c.name} (inlined ${c.inlined}) in ${JSON.stringify(rows)}`);
      assert.equal(r.calls, c.calls === null ? "-" : new Intl.NumberFormat("en-US").format(c.calls));
    }
    // Each caller's only caller is frame, the captured function, with the
    // same costs: one row, `Cull(…) ← frame`, as the CLI's text prints it.
    const text = execFileSync(bin, ["report", dump, "--callers", "GetPosition", "--min-percent", "0"], { encoding: "utf8" });
    const titles = await page.$$eval("table[data-test=tree] tbody tr td.label", (tds) => tds.slice(1).map((td) => td.title));
    assert.equal(titles.length, cliCallers.length, JSON.stringify(titles));
    for (const t of titles) {
      assert.match(t, / ← frame$/);
      assert.ok(text.split("\n").some((l) => l.endsWith(`  ${t}`)), `${t} in\n${text}`);
    }
    // Every caller on its own row: the hot path opened below the inlined
    // caller (its path names the inlined row); the other caller opens on
    // a click: both reach frame.
    await page.click("input[data-test=chains]"); // a click re-renders the controls: no check()
    await page.waitForFunction(() => [...document.querySelectorAll("table[data-test=tree] tbody .fname")].some((e) => e.textContent === "frame"));
    const closed = page.locator("table[data-test=tree] tbody tr .twisty", { hasText: "▸" }).first();
    await closed.click();
    await page.waitForFunction(() => [...document.querySelectorAll("table[data-test=tree] tbody .fname")].filter((e) => e.textContent === "frame").length === 2);
  });

  await step("33-top-down-rooted", async () => {
    await page.goto(`${url}#view=top_down&min=0`);
    await page.waitForSelector("table[data-test=tree][data-kind=top_down] tbody tr");
    const first = await page.textContent("table[data-test=tree] tbody tr td.label .fname");
    assert.equal(first, topDown.rows[0].name);
    assert.equal(first, "frame");
  });

  await step("34-long-names", async () => {
    // A narrow window: a long name is cut with an ellipsis, its whole
    // text in the cell's tooltip.
    await page.setViewportSize({ width: 700, height: 900 });
    await page.goto(`${url}#view=flat`);
    await page.waitForSelector("table[data-test=flat] tbody tr td.label");
    const cells = await page.$$eval("table[data-test=flat] tbody tr:not(.total) td.label", (tds) => tds.map((td) => ({
      text: td.textContent, title: td.title, cut: td.scrollWidth > td.clientWidth,
      ellipsis: getComputedStyle(td).textOverflow === "ellipsis" && getComputedStyle(td).whiteSpace === "nowrap",
    })));
    assert.ok(cells.every((c) => c.ellipsis), JSON.stringify(cells));
    assert.ok(cells.every((c) => c.title === c.text), JSON.stringify(cells));
    assert.ok(cells.some((c) => c.cut && /BroadPhase|Cull/.test(c.title)), JSON.stringify(cells));
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  await step("35-capture-modules", async () => {
    await page.goto(`${url}#view=capture`);
    await page.waitForSelector("[data-test=capture-modules]");
    const mods = await page.$$eval("[data-test=capture-modules] li", (lis) => lis.map((li) => li.firstChild.textContent.trim()));
    assert.ok(mods.length >= 2, JSON.stringify(mods));
    assert.equal(new Set(mods).size, mods.length, `each module once: ${JSON.stringify(mods)}`);
    assert.ok(!mods.some((m) => /libcoldcache\.so$/.test(m)), JSON.stringify(mods));
    assert.match(await page.textContent("[data-test=own-library]"), /libcoldcache\.so/);
  });
  assert.deepEqual(errors, [], "page errors");
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
