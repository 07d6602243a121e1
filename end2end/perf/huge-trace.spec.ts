import { test, expect } from "@playwright/test";

// The million-span trace of `treeline bench huge-trace`: a root over "fan-out" (its
// 100,000 children), 900 agents and a chain 50 levels deep. Each figure is printed
// for the README; the only assertions are that the page did what was timed.
const TRACE = "/traces?run_id=bench-huge&trace_id=huge-trace-1m";
const ROW = 26; // px, as the tree draws its rows
const SCROLL_ROWS = 10_000;

test("a million-span trace in the browser: open, expand the 100,000-child node, scroll 10,000 rows", async ({ page }) => {
  const tree = page.getByRole("tree");
  let started = Date.now();
  await page.goto(TRACE, { waitUntil: "commit" });
  await expect(tree.getByRole("treeitem").first()).toBeVisible();
  const firstRows = Date.now() - started;
  // Hydrated once the bundle has loaded and nothing is left on the wire.
  await page.waitForLoadState("networkidle");

  const fan = tree.getByRole("treeitem", { name: /fan-out/ });
  started = Date.now();
  await fan.locator("button.toggle").click();
  await expect(tree.getByRole("treeitem", { name: /call 0\b/ })).toBeVisible();
  const expanded = Date.now() - started;

  // Scroll by 20 rows a frame until 10,000 of the node's rows have passed, the
  // next pages read ahead as the tree goes; each frame's time is kept.
  const scrolled = await tree.evaluate(
    async (el, { rows, row }) => {
      const frames: number[] = [];
      const start = el.scrollTop;
      const began = performance.now();
      let last = began;
      while (el.scrollTop - start < rows * row && performance.now() - began < 120_000) {
        el.scrollTop += 20 * row;
        await new Promise((r) => requestAnimationFrame(r));
        const now = performance.now();
        frames.push(now - last);
        last = now;
      }
      return { frames, seconds: (performance.now() - began) / 1000, rows: (el.scrollTop - start) / row };
    },
    { rows: SCROLL_ROWS, row: ROW },
  );
  expect(scrolled.rows).toBeGreaterThanOrEqual(SCROLL_ROWS);
  await expect(tree.getByRole("treeitem", { name: /call 10\d\d\d\b/ }).first()).toBeVisible();
  const sorted = [...scrolled.frames].sort((a, b) => a - b);
  const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];
  const heap = await page.evaluate(() => (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0);
  console.log(
    `huge trace: first rows in ${firstRows} ms; the 100,000-child node's first rows ${expanded} ms after the click; ` +
      `${Math.round(scrolled.rows)} rows scrolled in ${scrolled.seconds.toFixed(1)} s over ${sorted.length} frames, ` +
      `frame p50 ${p(0.5).toFixed(1)} ms, p95 ${p(0.95).toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms; ` +
      `JS heap ${(heap / 1048576).toFixed(0)} MB`,
  );
});
