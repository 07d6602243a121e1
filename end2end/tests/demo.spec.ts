import { test, expect } from "./fixtures";

// scripts/e2e.sh loads the demo (`treeline demo --small`) before the tests run. The
// demo is seeded, so its counts are fixed; --small changes only the size of one trace
// and the flat GRPO run's prompts per step (8 of 32).
const DEMO = [
  { name: "ppo-cartpole", project: "demo-rl", status: "finished", traces: 162, failed: 42 },
  { name: "ppo-lunarlander-preempted", project: "demo-rl", status: "failed", traces: 32, failed: 0 },
  { name: "grpo-math-agent-live", project: "demo-agents", status: "running", traces: 10, failed: 0 },
  { name: "grpo-math-agent", project: "demo-agents", status: "finished", traces: 54, failed: 15 },
  { name: "grpo-flat-math-code", project: "demo-agents", status: "finished", traces: 12800, failed: 269 },
];

test("the runs page lists the demo runs with their trace counts", async ({ page, request }) => {
  const summaries = (await (await request.get("/api/runs?limit=500")).json()).runs;
  await page.goto("/");
  const table = page.getByRole("table");
  await expect(table).toBeVisible();
  const headers = (await table.getByRole("columnheader").allTextContents()).map((h) => h.trim());
  const column = (title: string) => {
    const index = headers.indexOf(title);
    expect(index, `column ${title} in ${headers}`).toBeGreaterThanOrEqual(0);
    return index;
  };
  for (const run of DEMO) {
    const row = table.getByRole("row").filter({ has: page.getByRole("cell", { name: run.name, exact: true }) });
    await expect(row).toHaveCount(1);
    const cells = row.getByRole("cell");
    await expect(cells.nth(column("Project"))).toHaveText(run.project);
    await expect(cells.nth(column("Status"))).toHaveText(run.status);
    await expect(cells.nth(column("Traces"))).toHaveText(String(run.traces));
    // Traces with a failure split into failed roots and failures beneath recovered ones.
    const summary = summaries.find((r: { name: string }) => r.name === run.name);
    expect(summary.error_trace_count).toBe(run.failed);
    await expect(cells.nth(column("Failed"))).toHaveText(String(summary.failed_trace_count));
    await expect(cells.nth(column("Failed beneath"))).toHaveText(String(run.failed - summary.failed_trace_count));
  }
});

test("the PPO demo run's failing stretch shows as a danger band", async ({ page }) => {
  await page.goto("/runs/demo-ppo-cartpole");
  await expect(page.getByRole("heading", { name: /ppo-cartpole/ })).toBeVisible();
  await expect(page.getByRole("figure").first()).toBeVisible();
  await page.getByRole("heading", { name: "Traces", exact: true }).click();
  const lane = page.getByRole("group", { name: "Trace activity per step" });
  await expect(lane.getByRole("button", { name: "step 301: 1 trace, 1 failed (100%)" })).toBeVisible();
  await expect(lane.getByRole("button", { name: "step 296: 1 trace" })).toBeVisible();
  // Steps 300–340 fail together; step 148's lone failure is a band of its own.
  await expect(page.locator(".danger-band")).toHaveCount(2);
});
