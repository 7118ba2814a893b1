// Drives the live view in a headless Debian browser and reports what the page shows as one
// JSON line on stdout; tests/all/ui.rs judges it. No browser download: `chromium` is
// /usr/bin/chromium through playwright-core, `firefox` is /usr/bin/firefox-esr through
// puppeteer-core over WebDriver BiDi (playwright-core's BiDi Firefox needs
// emulation.setMediaFeaturesOverride, which firefox-esr 153 does not have).
// Usage: node check.js chromium|firefox BASE_URL SCREENSHOT_PATH [fixture|default]
// `fixture` (the default): the test's daemon with data written into it. Protocol on stdout:
// "ready" once the page is live (the test then fires a notification), then the JSON report.
// `default`: a daemon on the embedded default config, the page opened as a user opens it (no
// parameters): only the JSON report. Every wait is bounded.
"use strict";

const [browserName, base, screenshot, mode = "fixture"] = process.argv.slice(2);
const WAIT = { timeout: 60000 };
// Lines are SVG: a flat one has no height, which playwright calls hidden. Attached is drawn
// (puppeteer's waitForSelector waits for attached unless told `visible`).
const DRAWN = { timeout: 60000, state: "attached" };
const VIEWPORT = { width: 1400, height: 1000 };

// The little the two drivers differ in; pages are used through the API they share
// (goto, waitForSelector, click, $eval, $$eval, evaluate, screenshot, on).
const DRIVERS = {
  chromium: async () => {
    const { chromium } = require("playwright-core");
    const browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    return {
      browser,
      newPage: () => browser.newPage({ viewport: VIEWPORT }),
      fill: (page, sel, value) => page.fill(sel, value),
      waitForFunction: (page, fn, opts) => page.waitForFunction(fn, null, opts),
    };
  },
  firefox: async () => {
    const puppeteer = require("puppeteer-core");
    const browser = await puppeteer.launch({
      browser: "firefox",
      executablePath: "/usr/bin/firefox-esr",
      headless: true,
    });
    return {
      browser,
      newPage: async () => {
        const page = await browser.newPage();
        await page.setViewport(VIEWPORT);
        return page;
      },
      fill: (page, sel, value) => page.locator(sel).fill(value),
      waitForFunction: (page, fn, opts) => page.waitForFunction(fn, opts),
    };
  },
};

(async () => {
  if (!DRIVERS[browserName]) {
    console.log(JSON.stringify({ errors: [`check.js: unknown browser ${browserName}`] }));
    return;
  }
  const report = { errors: [] };
  let driver;
  try {
    driver = await DRIVERS[browserName]();
  } catch (e) {
    report.errors.push(`check.js: starting ${browserName}: ` + (e && e.message ? e.message : String(e)));
    console.log(JSON.stringify(report));
    return;
  }
  const browser = driver.browser;
  try {
    const page = await driver.newPage();
    page.on("pageerror", (e) => report.errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") report.errors.push(m.text()); });
    if (mode === "default") {
      await onDefault(driver, page, report);
    } else {
      await onFixture(driver, page, report);
    }
  } catch (e) {
    report.errors.push("check.js: " + (e && e.message ? e.message : String(e)));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(report));
})();

// What a user of the default config sees on opening `/`: the daemon's own cluster, host and
// preferred metric (cpu_util), charted once it has two points; its pipelines, agents and
// processes.
async function onDefault(driver, page, report) {
  await page.goto(`${base}/`);
  await page.waitForSelector('#pipelines-table tr[data-pipeline="host"]', WAIT);
  await page.waitForSelector('#agent-table tr[data-agent="proc"]', WAIT);
  await page.waitForSelector("#proc-table tbody tr", WAIT);
  // Opened at start, the page shows the load first; CPU utilisation (a rate: its first value
  // comes with the second poll, 10 s) takes over at the page's next metric refresh (30 s).
  await driver.waitForFunction(page, () => document.getElementById("chart").dataset.metric === "cpu_util"
    && [...document.querySelectorAll("svg.chart polyline")].some((l) => Number(l.dataset.points) >= 2),
    { timeout: 90000 });
  report.metric_drawn = await page.$eval("#chart", (e) => e.dataset.metric);
  report.cluster = await page.$eval("#cluster", (s) => s.value);
  report.host = await page.$eval("#host", (s) => s.value);
  report.metric = await page.$eval("#metric", (s) => s.value);
  report.pipelines = await page.$$eval("#pipelines-table tr[data-pipeline]", (rs) =>
    [...new Set(rs.map((r) => r.dataset.pipeline))]);
  report.agents = await page.$$eval("#agent-table tr[data-agent]", (rs) => rs.map((r) => r.dataset.agent));
  report.series = await page.$$eval("svg.chart polyline", (ls) =>
    ls.map((l) => ({ name: l.dataset.series, points: Number(l.dataset.points), last: Number(l.dataset.last) })));
  report.procs = await page.$$eval("#proc-table tbody tr", (rs) => rs.length);
  report.sink_summary = await page.$eval("#sink-summary", (e) => e.textContent);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: screenshot, fullPage: true });
}

// The test's daemon with data in it: every part of the page checked.
async function onFixture(driver, page, report) {
  const t0 = Date.now();
  await page.goto(`${base}/?cluster=test&host=node1&metric=cpu_load`);
  await page.waitForSelector('#pipelines-table tr[data-pipeline="memory"]', WAIT);
  await page.waitForSelector('svg.chart polyline[data-series="node1/cpu3"]', DRAWN);
  await page.waitForSelector("#stream-state.ok", WAIT);
  report.stream_live_ms = Date.now() - t0;
  await page.waitForSelector("#proc-table tbody tr", WAIT);
  await page.waitForSelector('#ns-tree li[data-ns="foo"]', WAIT);
  report.loaded_ms = Date.now() - t0;
  console.log("ready");
  // The test fires a notification now; the stream must bring it without a reload.
  await page.waitForSelector('#notification-list li[data-metric="temp"]', WAIT);
  // Browse the namespace: open foo, fetch foo.version's value.
  await page.click('#ns-tree li[data-ns="foo"] > .node');
  await page.waitForSelector('#ns-tree li[data-ns="foo.version"]', WAIT);
  await page.click('#ns-tree li[data-ns="foo.version"] > .node');
  await page.waitForSelector('#ns-values table[data-fetched="foo.version"]', WAIT);
  // Sort the process table by memory.
  await page.click('#proc-table th[data-sort="mem"]');
  await page.waitForSelector('#proc-table th[data-sort="mem"].active', WAIT);
  report.pipelines = await page.$$eval("#pipelines-table tr[data-pipeline]", (rs) =>
    [...new Set(rs.map((r) => r.dataset.pipeline))]);
  report.guests = await page.$$eval("#pipelines-table tbody tr", (rs) =>
    rs.map((r) => [...r.cells].map((c) => c.textContent)));
  report.series = await page.$$eval("svg.chart polyline", (ls) =>
    ls.map((l) => ({ name: l.dataset.series, points: Number(l.dataset.points), last: Number(l.dataset.last) })));
  report.notifications = await page.$$eval("#notification-list li[data-metric]", (ls) => ls.map((l) => l.textContent));
  report.fetched = await page.$eval('#ns-values table[data-fetched="foo.version"]', (t) => t.textContent);
  report.procs_by_mem = await page.$$eval("#proc-table tbody tr", (rs) => rs.map((r) => r.cells[5].textContent));
  report.agents = await page.$$eval("#agent-table tr[data-agent]", (rs) => rs.map((r) => r.dataset.agent));
  await page.waitForSelector('#sink-table tr[data-sink="upstream"] .badge.failing', WAIT);
  report.sinks = await page.$$eval("#sink-table tr[data-sink]", (rs) =>
    rs.map((r) => [...r.cells].map((c) => c.textContent)));
  // Scroll to the top for the screenshot; the chart is what a person looks at first.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: screenshot, fullPage: true });

  // 100k series in the store: the host list stays bounded and says so.
  const big = await driver.newPage();
  big.on("pageerror", (e) => report.errors.push(String(e)));
  const t1 = Date.now();
  await big.goto(`${base}/?cluster=big&host=host0007&metric=m42`);
  await big.waitForSelector('svg.chart polyline[data-series="host0007"]', DRAWN);
  report.big_loaded_ms = Date.now() - t1;
  report.big_host_options = await big.$$eval("#host option", (os) => os.length);
  report.big_host_count = await big.$eval("#host-count", (e) => e.textContent);
  report.big_metric_options = await big.$$eval("#metric option", (os) => os.length);
  await driver.fill(big, "#host-filter", "host09");
  await driver.waitForFunction(big, () => document.querySelectorAll("#host option").length === 100, WAIT);
  report.big_filtered_count = await big.$eval("#host-count", (e) => e.textContent);
  report.big_filtered_options = await big.$$eval("#host option", (os) => os.length);
}
