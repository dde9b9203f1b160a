// The browser both UI test scripts drive: Debian's chromium (or $CHROMIUM)
// headless through playwright-core, one 1400×900 page, and the page's
// uncaught errors collected in `errors` (each script asserts it is empty).
import { chromium } from "playwright-core";

export async function launch() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  return { browser, page, errors };
}
