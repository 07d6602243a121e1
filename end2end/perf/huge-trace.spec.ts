import { test, expect } from "@playwright/test";

// The million-span trace of `treeline bench huge-trace`: a root over "fan-out" (its
// 100,000 children), 900 agents and a chain 50 levels deep. Each figure is printed
// for the README; the only assertions are that the page did what was timed.
const TRACE = "/traces?run_id=bench-huge&trace_id=huge-trace-1m";
const ROW = 26; // px, as the tree draws its rows
const SCROLL_ROWS = 10_000;

test("a million-span trace in the browser: open, expand the 100,000-child node, scroll 10,000 rows, jump", async ({ page }) => {
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

  // Scroll by 20 rows a frame until 10,000 of the node's rows have passed (down:
  // the next pages read ahead as the tree goes; then back up, through rows already
  // read); each frame's time is kept.
  const scroll = (rowsPerFrame: number) =>
    tree.evaluate(
      async (el, { rows, row, step }) => {
        // Per frame: the time since the last, and the work done in it before this
        // callback (the scroll's event handlers: the app's redraw), from the frame's
        // own start time.
        const frames: number[] = [];
        const work: number[] = [];
        const start = el.scrollTop;
        const began = performance.now();
        let last = began;
        while (Math.abs(el.scrollTop - start) < rows * row && performance.now() - began < 120_000) {
          el.scrollTop += step * row;
          const frameStart = await new Promise<number>((r) => requestAnimationFrame(r));
          const now = performance.now();
          frames.push(now - last);
          work.push(now - frameStart);
          last = now;
        }
        return { frames, work, seconds: (performance.now() - began) / 1000, rows: Math.abs(el.scrollTop - start) / row };
      },
      { rows: SCROLL_ROWS, row: ROW, step: rowsPerFrame },
    );
  const quantiles = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))].toFixed(1);
    return `p50 ${p(0.5)} ms, p95 ${p(0.95)} ms, max ${p(1)} ms`;
  };
  const figures = (s: { frames: number[]; work: number[]; seconds: number; rows: number }) =>
    `${Math.round(s.rows)} rows in ${s.seconds.toFixed(1)} s over ${s.frames.length} frames: ` +
    `${quantiles(s.frames)} between frames; the redraw ${quantiles(s.work)}`;
  // The browser's own clock, for scale: 300 frames with nothing scrolled.
  const idle = await page.evaluate(async () => {
    const frames: number[] = [];
    const work: number[] = [];
    const began = performance.now();
    let last = began;
    for (let i = 0; i < 300; i++) {
      const frameStart = await new Promise<number>((r) => requestAnimationFrame(r));
      const now = performance.now();
      frames.push(now - last);
      work.push(now - frameStart);
      last = now;
    }
    return { frames, work, seconds: (performance.now() - began) / 1000, rows: 0 };
  });
  const down = await scroll(20);
  expect(down.rows).toBeGreaterThanOrEqual(SCROLL_ROWS);
  await expect(tree.getByRole("treeitem", { name: /call 10\d\d\d\b/ }).first()).toBeVisible();
  const up = await scroll(-20);
  expect(up.rows).toBeGreaterThanOrEqual(SCROLL_ROWS - 1);
  // Jump within the node: to child 90,000, then to the children whose name holds
  // "call 9999" (11 of 100,000), each timed from Enter to the rows on screen.
  await tree.evaluate((el) => el.scrollTo(0, 0));
  // The fan-out node's bar (the root, with 902 children, has one too).
  const bar = tree.locator('.jump-row[aria-level="3"]');
  const goTo = bar.getByRole("spinbutton", { name: "Go to child number" });
  await goTo.fill("90000");
  started = Date.now();
  await goTo.press("Enter");
  await expect(tree.getByRole("treeitem", { name: /call 89999\b/ })).toBeVisible();
  const jumped = Date.now() - started;
  const find = bar.getByRole("searchbox", { name: "Find children by name" });
  await find.fill("call 9999");
  started = Date.now();
  await find.press("Enter");
  await expect(bar).toContainText("11 matching");
  const found = Date.now() - started;
  const heap = await page.evaluate(() => (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0);
  console.log(
    `huge trace: first rows in ${firstRows} ms; the 100,000-child node's first rows ${expanded} ms after the click; ` +
      `scrolled down ${figures(down)}; back up ${figures(up)}; idle ${figures(idle)}; ` +
      `to child 90,000 in ${jumped} ms; 11 children of 100,000 found by name in ${found} ms; ` +
      `JS heap ${(heap / 1048576).toFixed(0)} MB`,
  );
});
