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
    const wasm = await page.evaluate(() => {
      const entry = performance
        .getEntriesByType("resource")
        .find((e) => e.name.endsWith(".wasm")) as PerformanceResourceTiming | undefined;
      return entry ? { end: entry.responseEnd, bytes: entry.encodedBodySize } : null;
    });
    expect(wasm, "the page loaded its bundle").not.toBeNull();
    console.log(
      `first page, ${link.name}: the list shown at ${shown} ms, the bundle ` +
        `(${Math.round(wasm!.bytes / 1000)} KB on the wire) loaded at ${Math.round(wasm!.end)} ms, ` +
        `the filter working at ${interactive} ms`,
    );
    await context.close();
  });
}
