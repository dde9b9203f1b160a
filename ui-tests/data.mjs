// The Data tab of `coldcache ui` in a real browser (run by
// scripts/ui-tests.sh on a dump of tests-programs/data/entities.cpp, the
// talk's flag in a cold cache line, recorded with data types). What the page
// shows is checked against what the CLI prints of the same dump:
// `report --view data --json` (coverage, a field's reads and writes) and
// `report --view layout Entity` (the cache-line boundaries and the HOT FIELD
// flag). Environment:
//   COLDCACHE_UI_URL   the URL the server printed (with its token)
//   SCREENSHOTS        directory for the screenshots
//   COLDCACHE_BIN      the coldcache binary
//   DUMP               the dump served
//   OBJECTS_URL        the URL of a second server, serving OBJECTS_DUMP:
//                      tests-programs/data/objects.cpp's getposition case
//                      recorded with --objects (the Objects table)
import { launch } from "./browser.mjs";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";

const url = process.env.COLDCACHE_UI_URL;
const shots = process.env.SCREENSHOTS || "screenshots";
const bin = process.env.COLDCACHE_BIN;
const dump = process.env.DUMP;
const objectsUrl = process.env.OBJECTS_URL;
const objectsDump = process.env.OBJECTS_DUMP;
assert.ok(url && bin && dump, "COLDCACHE_UI_URL, COLDCACHE_BIN and DUMP must be set");
assert.ok(objectsUrl && objectsDump, "OBJECTS_URL and OBJECTS_DUMP must be set");
mkdirSync(shots, { recursive: true });

const cli = (...args) => execFileSync(bin, args, { encoding: "utf8" });
const grouped = (n) => new Intl.NumberFormat("en-US").format(n);
const pct = (x, total) => (total > 0 ? `${((100 * x) / total).toFixed(1)}%` : "0.0%");
// The truth: the CLI's data view (JSON, every row) and layout (text).
const data = JSON.parse(cli("report", dump, "--view", "data", "--json"));
const c = data.coverage;
assert.ok(c.typed > 0.99 * c.accesses, `entities is typed: ${JSON.stringify(c)}`);
const flags = data.fields.find((f) => f.label === "game::Entity::flags");
assert.ok(flags, "the CLI lists game::Entity::flags");
const layoutText = cli("report", dump, "--view", "layout", "Entity");
const boundaries = layoutText.split("\n").map((l) => (l.match(/\/\* --- cacheline .* --- \*\//) || [])[0]).filter(Boolean);
assert.ok(boundaries.length >= 2, `the CLI draws the boundaries: ${layoutText}`);
assert.match(layoutText, /HOT FIELD IN A COLD LINE: flags/);

const { browser, page, errors } = await launch();
const step = async (name, fn) => {
  const t0 = Date.now();
  await fn();
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
  console.log(`ok   ${name} (${Date.now() - t0} ms)`);
};
try {
  await step("30-data-tab", async () => {
    await page.goto(url);
    await page.waitForSelector("table[data-test=flat] tbody tr");
    // The tab is shown for a dump with data types.
    assert.ok(await page.isVisible("#tabs a[data-view=data]"), "the Data tab is shown");
    await page.click("#tabs a[data-view=data]");
    await page.waitForSelector("table[data-test=data-fields] tbody tr[data-test=field-row]");
    assert.match(page.url(), /#.*view=data/);
    assert.equal(
      (await page.textContent("[data-test=coverage]")).trim(),
      `data: ${pct(c.typed, c.accesses)} of ${grouped(c.accesses)} data accesses typed, ${pct(c.with_field, c.accesses)} with a field (${grouped(c.typed_instructions)} of ${grouped(c.instructions)} instructions with data accesses typed)`,
    );
    const row = page.locator("table[data-test=data-fields] tr[data-test=field-row]").filter({ has: page.locator("td.label", { hasText: /^game::Entity::flags$/ }) });
    assert.equal(await row.count(), 1, "one row for game::Entity::flags");
    const cells = await row.locator("td").allTextContents();
    // %, reads, writes first, as the CLI's columns.
    assert.equal(cells[0], flags.percent.toFixed(2));
    assert.equal(cells[1], grouped(flags.reads));
    assert.equal(cells[2], grouped(flags.writes));
    // Line use next: the flag's lines fetched and the bytes of each used
    // (8,192 and 2.0 on the talk's frame), as the CLI says.
    assert.ok(flags.line_use, "the dump has line use");
    assert.equal(cells[3], grouped(flags.line_use.lines_fetched));
    assert.equal(cells[4], flags.line_use.used_per_line.toFixed(1));
    assert.equal(cells[4], "2.0", "2 bytes of each flags line used");
    // Sorted by the CLI's default column: the same first field.
    assert.equal(await page.textContent("table[data-test=data-fields] tbody tr[data-test=field-row] td.label"), data.fields[0].label);
  });
  await step("31-data-layout", async () => {
    await page.locator("table[data-test=data-types] tr[data-test=type-row]").filter({ has: page.locator("td.label", { hasText: /^game::Entity$/ }) }).click();
    await page.waitForSelector("table[data-test=layout] tr[data-test=boundary]");
    assert.match(decodeURIComponent(page.url()), /#.*view=layout.*type=game::Entity/);
    const shown = (await page.$$eval("table[data-test=layout] tr[data-test=boundary] td.code", (els) => els.map((e) => e.textContent.trim())));
    assert.deepEqual(shown, boundaries, "the boundaries the CLI draws");
    const flagsRow = page.locator("table[data-test=layout] tr[data-test=member][data-path=flags]");
    assert.match(await flagsRow.textContent(), /uint16_t flags;/);
    // The flag's line: fetched once per entity, 2 bytes of it used.
    const line2 = page.locator("table[data-test=layout-lines] tr[data-test=line][data-line='2']");
    assert.equal(await line2.locator("[data-test=used]").textContent(), "2.0");
    const hot = await page.textContent("table[data-test=layout-lines] [data-test=hot-field]");
    assert.equal(hot, "HOT FIELD IN A COLD LINE: flags");
  });
  await step("32-layout-url", async () => {
    // Straight from the URL, by the type's last component.
    await page.goto(`${url}#view=layout&type=Entity`);
    await page.waitForSelector("table[data-test=layout] tr[data-test=boundary]");
    assert.match(await page.textContent("[data-test=layout-head]"), /type game::Entity: 192 bytes; cache lines of 64 bytes/);
    // An unknown type: the CLI's message, listing the types.
    await page.goto(`${url}#view=layout&type=NoSuchType`);
    await page.waitForSelector("[data-test=error]");
    assert.match(await page.textContent("[data-test=error]"), /no data type named 'NoSuchType'; the types are: .*game::Entity/);
  });
  await step("33-data-objects", async () => {
    // entities.ccdump was recorded without --objects: the CLI's note.
    await page.goto(`${url}#view=data`);
    await page.waitForSelector("[data-test=objects-note]");
    assert.equal((await page.textContent("[data-test=objects-note]")).trim(), data.objects_note);
    assert.match(data.objects_note, /^this dump has no object data \(record with --objects/);
    // objects.cpp's getposition with --objects: the talk's 12,000 objects
    // (128 bytes each) of one site, each read once and missed; the sites
    // in the CLI's order (the pointer array, read at random, has more
    // first-level misses).
    const od = JSON.parse(cli("report", objectsDump, "--view", "data", "--json")).objects;
    assert.ok(od, "the CLI has the objects");
    const i = od.sites.findIndex((x) => /^getposition/.test(x.frames[x.user_frame]) && x.bytes === 128 * x.blocks);
    assert.ok(i >= 0, `the CLI lists the GetPosition objects' site: ${JSON.stringify(od.sites)}`);
    const want = od.sites[i];
    assert.equal(want.blocks, 12000);
    await page.goto(`${objectsUrl}#view=data`);
    await page.waitForSelector("table[data-test=objects-sites] tr[data-test=site-row]");
    assert.deepEqual(await page.$$eval("table[data-test=objects-sites] tr[data-test=site-row] td[data-test=blocks]", (els) => els.map((e) => e.textContent)), od.sites.map((x) => grouped(x.blocks)), "the sites in the CLI's order");
    const row = page.locator("table[data-test=objects-sites] tr[data-test=site-row]").nth(i);
    const cells = await row.locator("td").allTextContents();
    assert.ok(cells[0].startsWith(want.frames[want.user_frame]), `the site's top frame: ${cells[0]}`);
    assert.match(cells[0], /^getposition.*objects\.cpp:\d+/);
    assert.equal(cells[1], "malloc");
    assert.equal(cells[2], "12,000", "the GetPosition site's blocks");
    assert.deepEqual(cells.slice(2), [want.blocks, want.bytes, want.accesses, want.reads, want.writes, ...want.misses].map(grouped));
    assert.equal(await page.locator("table[data-test=objects-sites] tr[data-test=site-row]").count(), od.sites.length);
    assert.equal(await page.locator("table[data-test=objects-others] tr[data-test=object-row]").count(), od.others.length);
    // A mapping typed by the instructions that touched it: the eviction
    // pass reads the global `evict` (the executable's .data/.bss), its
    // type and first fields under the row's label, all of them in the
    // tooltip.
    const m = od.others.findIndex((x) => x.fields.some((f) => /^evict/.test(f.field)));
    assert.ok(m >= 0, `a mapping names the global evict: ${JSON.stringify(od.others)}`);
    const mrow = page.locator("table[data-test=objects-others] tr[data-test=object-row]").nth(m);
    const mtype = await mrow.locator("[data-test=object-type]").textContent();
    assert.ok(mtype.includes(od.others[m].fields[0].field), `the mapping's first field: ${mtype}`);
    const mtitle = await mrow.locator("td").first().getAttribute("title");
    for (const f of od.others[m].fields) assert.ok(mtitle.includes(f.field), `the tooltip has ${f.field}: ${mtitle}`);
    // Its whole allocation stack: the tooltip, and below the row on click.
    const title = await row.getAttribute("title");
    for (const f of [want.label, ...want.frames]) assert.ok(title.includes(f), `the tooltip has ${f}: ${title}`);
    const stack = page.locator("table[data-test=objects-sites] tr[data-test=site-stack]").nth(i);
    assert.ok(!(await stack.isVisible()), "the stack is folded");
    await row.click();
    assert.ok(await stack.isVisible(), "a click shows the stack");
    const text = await stack.textContent();
    for (const f of want.frames) assert.ok(text.includes(f), `the stack shows ${f}: ${text}`);
  });
  assert.deepEqual(errors, [], "page errors");
} catch (e) {
  await page.screenshot({ path: `${shots}/data-failure.png` });
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
