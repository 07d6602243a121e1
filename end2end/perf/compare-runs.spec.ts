import { test, expect } from "@playwright/test";

// The sweep of `treeline bench compare-runs`: 20 runs, each with 4 metrics of
// 100,000 steps. Each figure is printed for the README; the only assertions are that
// the page drew what was timed.
const RUNS = Array.from({ length: 20 }, (_, r) => `sweep-lr-${String(r).padStart(2, "0")}`);
const PAGE = `/compare-runs?${RUNS.map((r) => `run=${r}`).join("&")}`;
const SAMPLES = 5;

test.skip(!process.env.BENCH_SWEEP, "run by scripts/browser-bench.sh against the sweep");

test("20 runs x 4 metrics x 100,000 points: first chart, every chart, hydrated, and a zoom", async ({ page }) => {
  const charts = page.locator("figure.run-chart .chart-surface");
  const first: number[] = [];
  const all: number[] = [];
  const hydrated: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = Date.now();
    await page.goto(PAGE, { waitUntil: "commit" });
    await expect(charts.first()).toHaveAttribute("aria-label", /: 20 lines over step/);
    first.push(Date.now() - started);
    await expect(charts).toHaveCount(4);
    all.push(Date.now() - started);
    await page.waitForLoadState("networkidle");
    hydrated.push(Date.now() - started);
  }
  // A zoom by dragging across the first chart: the URL changes, the server reads the
  // range again and every chart redraws.
  const box = await charts.first().boundingBox();
  if (!box) throw new Error("no chart to drag across");
  const zooms: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    await page.goto(PAGE);
    await page.waitForLoadState("networkidle");
    const started = Date.now();
    await page.mouse.move(box.x + box.width * 0.4, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 4 });
    await page.mouse.up();
    await expect(page).toHaveURL(/from=\d+&to=\d+/);
    await page.waitForLoadState("networkidle");
    await expect(charts).toHaveCount(4);
    zooms.push(Date.now() - started);
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
  const worst = (v: number[]) => Math.max(...v);
  const line = (name: string, v: number[]) => console.log(`${name.padEnd(44)} median ${median(v)} ms, worst ${worst(v)} ms`);
  console.log(`compare-runs, ${RUNS.length} runs x 4 metrics x 100,000 points, ${SAMPLES} loads each:`);
  line("first chart drawn (server-rendered HTML)", first);
  line("all 4 charts drawn", all);
  line("hydrated (nothing left on the wire)", hydrated);
  line("drag-zoom to charts redrawn", zooms);
});
