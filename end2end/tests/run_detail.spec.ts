import { test, expect, createRun, sendEvents } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

const RUN = "e2e-timeline";
const BIG = "e2e-3000-steps";

function rollout(trace: string, step: number | null, status: string) {
  const open: Record<string, unknown> = { op: "open", trace_id: trace, span_id: "root", name: `rollout ${trace}`, kind: "rollout", ts: 100 };
  if (step !== null) open.step = step;
  return [open, { op: "close", trace_id: trace, span_id: "root", status, ts: 200 }];
}

test.beforeAll(async ({ request }) => {
  await createRun(request, RUN, "timeline-e2e", "ppo-timeline");
  // Steps 0..9, two traces each; steps 4 and 5 fail; three traces have no step.
  const events: object[] = [];
  for (let step = 0; step < 10; step++) {
    for (const k of [0, 1]) {
      const failing = (step === 4 || step === 5) && k === 0;
      events.push(...rollout(`s${step}-${k}`, step, failing ? "error" : "ok"));
    }
  }
  for (const k of [0, 1, 2]) events.push(...rollout(`free-${k}`, null, "ok"));
  await sendEvents(request, RUN, events);
  const points = Array.from({ length: 10 }, (_, step) => ({ key: "train/episode_return", step, value: step === 4 || step === 5 ? 2 : 10 + step }));
  const m = await request.post(`/api/runs/${RUN}/metrics`, { data: { points } });
  expect(m.ok()).toBeTruthy();

  await createRun(request, BIG, "timeline-e2e", "long-run");
  const many: object[] = [];
  for (let step = 0; step < 3000; step++) many.push(...rollout(`t${step}`, step, "ok"));
  await sendEvents(request, BIG, many);
});

test("opening Traces draws one marker per step with the run's totals", async ({ page }) => {
  await page.goto(`/runs/${RUN}`);
  await expect(page.getByRole("heading", { name: /ppo-timeline/ })).toBeVisible();
  await expect(page.getByRole("figure").first()).toBeVisible();
  await expectNoA11yViolations(page);
  await page.getByRole("heading", { name: "Traces", exact: true }).click();
  const lane = page.getByRole("group", { name: "Trace activity per step" });
  await expect(lane.getByRole("button")).toHaveCount(10);
  await expect(lane.getByRole("button", { name: "step 4: 2 traces, 1 failed (50%)" })).toBeVisible();
  const head = page.locator(".timeline-head");
  await expect(head).toContainText("23 traces");
  await expect(head).toContainText("2 errored");
  await expect(head).toContainText("3 without a step");
  await expect(head).toContainText("steps 0–9");
  await expect(page.locator(".danger-band")).toHaveCount(1);
  await expect(page.getByRole("list", { name: "Traces of this run" }).getByRole("listitem")).toHaveCount(23);
  await expectNoA11yViolations(page);
});

// A run's charts share the row between them, rather than sit at their smallest size
// with the rest of the row empty.
test("two metric charts share the width of the row", async ({ page, request }) => {
  const run = "e2e-two-metrics";
  await createRun(request, run, "timeline-e2e", "two metrics");
  const points = ["train/loss", "train/reward"].flatMap((key) =>
    Array.from({ length: 20 }, (_, step) => ({ key, step, value: step % 7 })));
  expect((await request.post(`/api/runs/${run}/metrics`, { data: { points } })).ok()).toBeTruthy();
  await page.goto(`/runs/${run}`);
  const section = page.locator("section.metrics");
  const charts = section.getByRole("figure");
  await expect(charts).toHaveCount(2);
  // The caption gives the data's own range, not the padded axis's.
  await expect(charts.first().locator(".chart-range")).toHaveText("min 0 · max 6");
  const row = (await section.boundingBox())!.width;
  for (const chart of await charts.all()) {
    expect((await chart.boundingBox())!.width).toBeGreaterThan(row * 0.4);
    // The values at the grid lines sit beside the line, not over it.
    const plot = (await chart.locator(".chart-surface").boundingBox())!;
    const ticks = chart.locator(".chart-ticks span");
    await expect(ticks.first()).toBeVisible();
    for (const tick of await ticks.all()) {
      const box = (await tick.boundingBox())!;
      expect(box.x + box.width).toBeLessThanOrEqual(plot.x);
    }
  }
  // Both axes read at round values, and the step labels sit apart, under their steps.
  await expect(charts.first().locator(".chart-ticks span")).toHaveText(["0", "2", "4", "6"]);
  const steps = charts.first().locator(".chart-axis span");
  await expect(steps).toHaveText(["step 0", "step 5", "step 10", "step 15"]);
  const boxes = await Promise.all((await steps.all()).map(async (s) => (await s.boundingBox())!));
  for (let i = 1; i < boxes.length; i++) {
    expect(boxes[i].x).toBeGreaterThan(boxes[i - 1].x + boxes[i - 1].width);
  }
  // The hover readout stands over the step under the pointer.
  const plot = (await charts.first().locator(".chart-surface").boundingBox())!;
  await page.mouse.move(plot.x + plot.width - 2, plot.y + plot.height / 2);
  const readout = charts.first().locator(".chart-readout");
  await expect(readout).toHaveText(/^step 19: /);
  const r = (await readout.boundingBox())!;
  expect(Math.abs(r.x + r.width / 2 - (plot.x + plot.width))).toBeLessThan(20);
});

test("clicking a step pins the list to it, and the chip clears it", async ({ page }) => {
  await page.goto(`/runs/${RUN}`);
  await page.getByRole("heading", { name: "Traces", exact: true }).click();
  const list = page.getByRole("list", { name: "Traces of this run" });
  await expect(list.getByRole("listitem")).toHaveCount(23);
  await page.getByRole("button", { name: /^step 7:/ }).click();
  await expect(page).toHaveURL(/step=7/);
  await expect(list.getByRole("listitem")).toHaveCount(2);
  await expect(list).toContainText("rollout s7-0");
  await page.getByRole("button", { name: "Clear step 7" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(23);
});

test("a trace row opens the workspace with its root selected", async ({ page }) => {
  await page.goto(`/runs/${RUN}?step=4`);
  await page.getByRole("link", { name: /rollout s4-0/ }).click();
  await expect(page).toHaveURL(/\/traces\?run_id=e2e-timeline&trace_id=s4-0&span_id=root/);
  await expect(page.getByRole("treeitem", { name: /rollout s4-0/ })).toHaveAttribute("aria-selected", "true");
});

test("a run with 3,000 steps says the lane is truncated", async ({ page }) => {
  await page.goto(`/runs/${BIG}`);
  await page.getByRole("heading", { name: "Traces", exact: true }).click();
  await expect(page.getByRole("note")).toContainText("first 2000 distinct steps");
  await expect(page.getByRole("group", { name: "Trace activity per step" }).getByRole("button")).toHaveCount(2000);
});

test("a pinned step with 150 traces pages past the first 100", async ({ page, request }) => {
  const CROWDED = "e2e-crowded-step";
  await createRun(request, CROWDED, "timeline-e2e", "crowded");
  const events: object[] = [];
  for (let k = 0; k < 150; k++) events.push(...rollout(`c${k}`, 3, k % 10 === 0 ? "error" : "ok"));
  events.push(...rollout("other", 4, "ok"));
  await sendEvents(request, CROWDED, events);
  await page.goto(`/runs/${CROWDED}?step=3`);
  const list = page.getByRole("list", { name: "Traces of this run" });
  await expect(list.getByRole("listitem")).toHaveCount(100);
  await page.getByRole("button", { name: "Load 100 more" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(150);
  await expect(page.getByRole("button", { name: "Load 100 more" })).toHaveCount(0);
  await expect(list).not.toContainText("rollout other");
});

// A flaky tool fails one rollout in eight at most steps; at steps 6 and 7, six in
// eight fail. The lane says how much failed at each step, and only the outage gets
// the red band.
test("the lane shows each step's failure share and bands only what stands out", async ({ page, request }) => {
  const run = "e2e-failure-share";
  await createRun(request, run, "timeline-e2e", "flaky tool");
  const events: object[] = [];
  for (let step = 0; step < 10; step++) {
    const failing = step === 6 || step === 7 ? 6 : step % 3 === 0 ? 0 : 1;
    for (let k = 0; k < 8; k++) events.push(...rollout(`f${step}-${k}`, step, k < failing ? "error" : "ok"));
  }
  await sendEvents(request, run, events);
  await page.goto(`/runs/${run}`);
  await page.getByRole("heading", { name: "Traces", exact: true }).click();
  const lane = page.getByRole("group", { name: "Trace activity per step" });
  await expect(lane.getByRole("button", { name: "step 6: 8 traces, 6 failed (75%)" })).toBeVisible();
  await expect(lane.getByRole("button", { name: "step 1: 8 traces, 1 failed (13%)" })).toBeVisible();
  await expect(lane.getByRole("button", { name: "step 3: 8 traces" , exact: true })).toBeVisible();
  // The marker's red share follows the failures: 75% against 13%.
  const share = (name: string) => lane.getByRole("button", { name }).evaluate((e) =>
    getComputedStyle(e).getPropertyValue("--share").trim());
  expect(await share("step 6: 8 traces, 6 failed (75%)")).toBe("0.750");
  expect(await share("step 1: 8 traces, 1 failed (13%)")).toBe("0.125");
  const bands = page.locator(".danger-band");
  await expect(bands).toHaveCount(1);
  await expect(bands.first()).toHaveAttribute("title", /^steps 6–7: /);
  await page.screenshot({ path: "test-results/failure-share-lane.png", fullPage: false });
});


test("a run is deleted from its page once its name is typed", async ({ page, request }) => {
  const run = "e2e-to-delete";
  await createRun(request, run, "delete-e2e", "mistaken run");
  await createRun(request, "e2e-to-keep", "delete-e2e", "kept run");
  await sendEvents(request, run, rollout("gone-1", 1, "ok"));
  await page.goto(`/runs/${run}`);
  await page.getByText("Delete this run").click();
  const button = page.getByRole("button", { name: "Delete run" });
  const confirm = page.getByRole("textbox", { name: /Type the run's name/ });
  await expect(button).toBeDisabled();
  await confirm.fill("mistaken");
  await expect(button).toBeDisabled();
  await confirm.fill("mistaken run");
  await expect(button).toBeEnabled();
  await expectNoA11yViolations(page);
  await page.screenshot({ path: "test-results/delete-run.png", fullPage: true });
  await button.click();
  // Back on the project's runs, without it.
  await expect(page).toHaveURL(/\/\?project=delete-e2e$/);
  await expect(page.getByRole("link", { name: "kept run" })).toBeVisible();
  await expect(page.getByRole("link", { name: "mistaken run" })).toHaveCount(0);
  expect((await request.get(`/api/runs/${run}`)).status()).toBe(404);
  await page.goto(`/runs/${run}`);
  await expect(page.getByRole("alert")).toContainText(run);
});
