// The browser both UI test scripts drive: Debian's chromium (or $CHROMIUM)
// headless through playwright-core, one 1400×900 page, and the page's
// uncaught errors collected in `errors` (each script asserts it is empty),
// with every Content-Security-Policy violation chromium reports (an inline
// style or script the page's policy refuses).
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
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) errors.push(`CSP: ${m.text()}`); });
  return { browser, page, errors };
}
