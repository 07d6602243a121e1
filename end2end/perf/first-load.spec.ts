import { test, expect } from "@playwright/test";

// The first page from a cold cache: the runs list until the bundle has loaded and the
// page has hydrated, on this machine's loopback and on two slower links (Chromium's
// own throttling). Figures for the README; the assertions only check what was timed.
const LINKS = [
  { name: "loopback", mbit: 0, latency: 0 },
  { name: "50 Mbit/s, 20 ms", mbit: 50, latency: 20 },
  { name: "10 Mbit/s, 40 ms", mbit: 10, latency: 40 },
];

for (const link of LINKS) {
  test(`first page from a cold cache, ${link.name}`, async ({ browser }) => {
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
    const started = Date.now();
    await page.goto("/", { waitUntil: "commit" });
    await expect(page.getByRole("table")).toBeVisible();
    const shown = Date.now() - started;
    // Interactive once hydrated: the filter narrows the list (before, typing does
    // nothing, so it is typed again until it does).
    const filter = page.getByLabel("Filter runs");
    await expect(async () => {
      await filter.fill("");
      await filter.fill("no run is named this");
      await expect(page.getByText(/^0 of \d+ runs$/)).toBeVisible({ timeout: 50 });
    }).toPass({ intervals: [25], timeout: 60_000 });
    const interactive = Date.now() - started;
    // Every wasm and JS file the page fetched: the bundle is split by route.
    const code = await page.evaluate(() => {
      const files = (performance.getEntriesByType("resource") as PerformanceResourceTiming[]).filter(
        (e) => /\.(wasm|js)$/.test(new URL(e.name).pathname),
      );
      const wasm = files.filter((e) => e.name.endsWith(".wasm"));
      return {
        wasmFiles: wasm.length,
        end: Math.max(0, ...wasm.map((e) => e.responseEnd)),
        bytes: files.reduce((sum, e) => sum + e.encodedBodySize, 0),
      };
    });
    expect(code.wasmFiles, "the page loaded its bundle").toBeGreaterThan(0);
    console.log(
      `first page, ${link.name}: the list shown at ${shown} ms, its code ` +
        `(${code.wasmFiles} wasm file(s) and the JS, ${Math.round(code.bytes / 1000)} KB on the wire) ` +
        `loaded at ${Math.round(code.end)} ms, the filter working at ${interactive} ms`,
    );
    await context.close();
  });
}
