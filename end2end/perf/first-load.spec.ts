import { test, expect, type Browser, type Page } from "@playwright/test";

// First pages from a cold cache, on this machine's loopback and on two slower links
// (Chromium's own throttling): the runs list, and a deep link to the workspace,
// each until the page has hydrated. Figures for the README; the assertions only
// check what was timed.
const LINKS = [
  { name: "loopback", mbit: 0, latency: 0 },
  { name: "50 Mbit/s, 20 ms", mbit: 50, latency: 20 },
  { name: "10 Mbit/s, 40 ms", mbit: 10, latency: 40 },
];
type Link = (typeof LINKS)[number];

// A link from a ticket to the million-span trace of `make browser-bench`.
const DEEP_LINK = "/traces?run_id=bench-huge&trace_id=huge-trace-1m";

// A fresh context (nothing cached) whose page sees `link`.
async function coldPage(browser: Browser, link: Link): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  if (link.mbit > 0) {
    const cdp = await context.newCDPSession(page);
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", {
      offline: false,
      latency: link.latency,
      downloadThroughput: (link.mbit * 1e6) / 8,
      uploadThroughput: (link.mbit * 1e6) / 8,
    });
  }
  return page;
}

// Every wasm and JS file the page fetched (the bundle is split by route): how many
// wasm files, when the last arrived, and the bytes on the wire.
async function code(page: Page) {
  const code = await page.evaluate(() => {
    const files = (performance.getEntriesByType("resource") as PerformanceResourceTiming[]).filter(
      (e) => /\.(wasm|js)$/.test(new URL(e.name).pathname),
    );
    const wasm = files.filter((e) => e.name.endsWith(".wasm"));
    return {
      wasmFiles: wasm.length,
      end: Math.round(Math.max(0, ...wasm.map((e) => e.responseEnd))),
      kb: Math.round(files.reduce((sum, e) => sum + e.encodedBodySize, 0) / 1000),
    };
  });
  expect(code.wasmFiles, "the page loaded its bundle").toBeGreaterThan(0);
  return code;
}

// Types into `box` until `works` shows, which only the hydrated page can show.
async function untilAnswering(box: ReturnType<Page["getByLabel"]>, text: string, works: ReturnType<Page["getByText"]>) {
  await expect(async () => {
    await box.fill("");
    await box.fill(text);
    await expect(works).toBeVisible({ timeout: 50 });
  }).toPass({ intervals: [25], timeout: 60_000 });
}

for (const link of LINKS) {
  test(`first page from a cold cache, ${link.name}`, async ({ browser }) => {
    const page = await coldPage(browser, link);
    const started = Date.now();
    await page.goto("/", { waitUntil: "commit" });
    await expect(page.getByRole("table")).toBeVisible();
    const shown = Date.now() - started;
    await untilAnswering(page.getByLabel("Filter runs"), "no run is named this", page.getByText(/^0 of \d+ runs$/));
    const interactive = Date.now() - started;
    const c = await code(page);
    console.log(
      `first page, ${link.name}: the list shown at ${shown} ms, its code ` +
        `(${c.wasmFiles} wasm file(s) and the JS, ${c.kb} KB on the wire) ` +
        `loaded at ${c.end} ms, the filter working at ${interactive} ms`,
    );
    await page.context().close();
  });
}

for (const link of LINKS) {
  test(`a deep link to the workspace from a cold cache, ${link.name}`, async ({ browser }) => {
    const page = await coldPage(browser, link);
    const started = Date.now();
    await page.goto(DEEP_LINK, { waitUntil: "commit" });
    await expect(page.getByRole("tree").getByRole("treeitem").first()).toBeVisible();
    const shown = Date.now() - started;
    await untilAnswering(page.getByLabel("Search"), "a b c d e f g h i", page.getByText("9 terms: at most 8 are allowed"));
    const interactive = Date.now() - started;
    const c = await code(page);
    console.log(
      `deep link, ${link.name}: the tree shown at ${shown} ms, its code ` +
        `(${c.wasmFiles} wasm file(s) and the JS, ${c.kb} KB on the wire) ` +
        `loaded at ${c.end} ms, the search box working at ${interactive} ms`,
    );
    await page.context().close();
  });
}
