// `coldcache ui` on two dumps simulated with different caches (run by
// scripts/ui-tests.sh): the page says so above the two summaries, on the
// default page and on the comparison, in the words `coldcache diff` starts
// with (the same check, crates/analysis diff::cache_mismatch). Environment:
//   COLDCACHE_UI_URL   the URL the server printed (with its token)
//   SCREENSHOTS        directory for the screenshots
//   COLDCACHE_BIN      the coldcache binary
//   DUMP_A, DUMP_B     the two dumps served
import { launch } from "./browser.mjs";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";

const url = process.env.COLDCACHE_UI_URL;
const shots = process.env.SCREENSHOTS || "screenshots";
const bin = process.env.COLDCACHE_BIN;
const dumps = [process.env.DUMP_A, process.env.DUMP_B];
assert.ok(url && bin && dumps[0] && dumps[1], "COLDCACHE_UI_URL, COLDCACHE_BIN, DUMP_A and DUMP_B must be set");
mkdirSync(shots, { recursive: true });

const cli = (...args) => execFileSync(bin, args, { encoding: "utf8" });
// The truth: the warning `coldcache diff` prints first, and each dump's
// cache as `coldcache report` names it.
const warning = (cli("diff", dumps[0], dumps[1], "--limit", "1").match(/^warning: (.*)$/m) || [])[1];
assert.ok(warning && /different caches/.test(warning), "coldcache diff warns that the caches differ");
const caches = dumps.map((d) => cli("report", d, "--limit", "1").match(/^cache:\s+(.*)$/m)[1]);
assert.notEqual(caches[0], caches[1]);

const { browser, page, errors } = await launch();
try {
  await page.setViewportSize({ width: 1400, height: 900 });
  for (const view of ["flat", "compare"]) {
    await page.goto(`${url}#view=${view}`);
    await page.waitForSelector("[data-test=cache-mismatch]");
    assert.equal(await page.textContent("[data-test=cache-mismatch]"), `⚠ ${warning}`);
    for (const i of [0, 1]) {
      assert.equal(await page.textContent(`[data-test=summary][data-dump='${i}'] [data-test=summary-cache]`), caches[i]);
    }
    // The warning comes first: above both summaries.
    const above = await page.evaluate(() => {
      const w = document.querySelector("[data-test=cache-mismatch]").getBoundingClientRect();
      return [...document.querySelectorAll("[data-test=summary]")].every((c) => w.bottom <= c.getBoundingClientRect().top);
    });
    assert.ok(above, "the warning is above the summaries");
    await page.screenshot({ path: `${shots}/20-mismatch-${view}.png` });
    console.log(`ok   20-mismatch-${view}`);
  }
  assert.deepEqual(errors, [], "page errors");
} catch (e) {
  await page.screenshot({ path: `${shots}/mismatch-failure.png` });
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
