import type { APIRequestContext, Page } from "@playwright/test";
import { test, expect } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

const PROJECT = "compare-runs-e2e";

/** When every run here starts: fixed, so that each worker's beforeAll writes the same runs. */
const START_US = Date.UTC(2026, 11, 1, 12, 0, 0) * 1000;

/** A run with a config and, per key, 300 steps logged a second apart from its start. */
async function loggedRun(
  request: APIRequestContext,
  runId: string,
  config: object,
  keys: Record<string, (step: number) => number>,
): Promise<void> {
  const put = await request.put(`/api/runs/${runId}`, { data: { project: PROJECT, name: runId, config, start_us: START_US } });
  expect(put.ok(), await put.text()).toBeTruthy();
  const points = Object.entries(keys).flatMap(([key, f]) =>
    Array.from({ length: 300 }, (_, step) => ({ key, step, value: f(step), ts: START_US + step * 1_000_000 })));
  const m = await request.post(`/api/runs/${runId}/metrics`, { data: { points } });
  expect(m.ok(), await m.text()).toBeTruthy();
}

test.beforeAll(async ({ request }) => {
  const noisy = (seed: number) => (step: number) => step / 100 + Math.sin(step * (seed + 1)) * 0.3;
  await loggedRun(request, "cmp-seed-0", { lr: 0.001, seed: 0, model: { name: "qwen", layers: 24 } },
    { reward: noisy(0), "train/loss": (s) => 3 - s / 150 });
  await loggedRun(request, "cmp-seed-1", { lr: 0.001, seed: 1, model: { name: "qwen", layers: 24 } },
    { reward: noisy(1), "train/loss": (s) => 3.2 - s / 140 });
  await loggedRun(request, "cmp-reward-only", { lr: 0.01, seed: 0 }, { reward: noisy(2) });
});

/** The chart of `key` on the compare-runs page. */
function chart(page: Page, key: string) {
  return page.locator("figure.run-chart").filter({ has: page.locator(".chart-title", { hasText: new RegExp(`^${key}$`) }) });
}

/** How many of a chart's polylines are drawn in a run's colour (not the grid's). */
async function runLines(page: Page, key: string): Promise<number> {
  return chart(page, key).locator("svg polyline:not([stroke='#E2E6EC'])").count();
}

test("two ticked runs open on shared charts that smooth, zoom, hide and reload the same", async ({ page }) => {
  await page.goto(`/?project=${PROJECT}`);
  await page.getByRole("checkbox", { name: "Compare cmp-seed-0" }).check();
  await expect(page).toHaveURL(/pick=cmp-seed-0/);
  await page.getByRole("checkbox", { name: "Compare cmp-seed-1" }).check();
  await page.getByRole("link", { name: "Compare 2 runs" }).click();
  await expect(page).toHaveURL(/\/compare-runs\?run=cmp-seed-0&run=cmp-seed-1$/);

  const legend = page.getByRole("list", { name: "Runs compared" });
  await expect(legend.getByRole("link")).toHaveText(["cmp-seed-0", "cmp-seed-1"]);
  for (const key of ["reward", "train/loss"]) {
    await expect(chart(page, key).locator(".chart-surface")).toHaveAttribute("aria-label", new RegExp(`^${key}: 2 lines over step`));
    expect(await runLines(page, key)).toBe(2);
  }
  // The config keys that differ come first; the shared ones are folded away.
  const differ = page.getByRole("table", { name: "Config keys that differ" });
  await expect(differ.getByRole("rowheader")).toHaveText(["seed"]);
  await expect(page.getByText("3 keys the same in every run")).toBeVisible();
  await expectNoA11yViolations(page);

  // Smoothing keeps each raw line, faint, under its average.
  await page.getByLabel("Smoothing").fill("0.8");
  await expect(page).toHaveURL(/smooth=0\.80/);
  await expect.poll(() => runLines(page, "reward")).toBe(4);

  // A drag across the reward chart zooms every chart to the steps it covered.
  const surface = chart(page, "reward").locator(".chart-surface");
  const box = (await surface.boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.25, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await expect(page).toHaveURL(/from=7\d&to=1[45]\d/);
  const axis = chart(page, "train/loss").locator(".chart-axis span");
  await expect(axis.first()).toHaveText(/^(7|8|9)\d$/);
  await expect(page.getByRole("button", { name: "Reset zoom" })).toBeVisible();

  // Hiding a run takes its line out of every chart.
  await page.getByRole("checkbox", { name: "Show cmp-seed-1" }).uncheck();
  await expect(page).toHaveURL(/hide=cmp-seed-1/);
  await expect(chart(page, "reward").locator(".chart-surface")).toHaveAttribute("aria-label", /^reward: 1 line over/);

  // The link is the view.
  const link = page.url();
  await page.reload();
  expect(page.url()).toBe(link);
  await expect(page.getByLabel("Smoothing")).toHaveValue("0.8");
  await expect(chart(page, "reward").locator(".chart-surface")).toHaveAttribute("aria-label", /^reward: 1 line over/);
  await expect(axis.first()).toHaveText(/^(7|8|9)\d$/);
  await expect(page.getByRole("checkbox", { name: "Show cmp-seed-1" })).not.toBeChecked();

  // A double click resets the zoom.
  await chart(page, "reward").locator(".chart-surface").dblclick();
  await expect(page).not.toHaveURL(/from=/);
  await expect(axis.first()).toHaveText("0");
});

test("a run without a metric is named, time axes read as times, and bad links say why", async ({ page }) => {
  await page.goto("/compare-runs?run=cmp-seed-0&run=cmp-reward-only");
  await expect(chart(page, "train/loss").locator(".missing")).toHaveText("not logged by cmp-reward-only");
  await expect(page.getByRole("table", { name: "Config keys that differ" }).getByRole("rowheader"))
    .toHaveText(["lr", "model.layers", "model.name"]);

  await page.getByLabel("X-axis").selectOption("elapsed");
  await expect(page).toHaveURL(/x=elapsed/);
  // 300 points a second apart: round minutes since the start.
  await expect(chart(page, "reward").locator(".chart-axis span")).toHaveText(["1 min", "2 min", "3 min", "4 min"]);
  await page.getByLabel("X-axis").selectOption("wall");
  await expect(chart(page, "reward").locator(".chart-axis span")).toHaveText(["12:01", "12:02", "12:03", "12:04"]);
  await expectNoA11yViolations(page);

  await page.goto("/compare-runs?run=cmp-seed-0&run=no-such-run");
  await expect(page.getByRole("alert")).toContainText("no-such-run");
  const many = Array.from({ length: 21 }, (_, i) => `run=r${i}`).join("&");
  await page.goto(`/compare-runs?${many}`);
  await expect(page.getByRole("alert")).toContainText("at most 20");
});

test("compare with… on a run's page starts a comparison from that run", async ({ page }) => {
  await page.goto("/runs/cmp-seed-1");
  await page.getByRole("link", { name: "Compare with…" }).click();
  await expect(page).toHaveURL(new RegExp(`project=${PROJECT}&pick=cmp-seed-1`));
  await expect(page.getByRole("checkbox", { name: "Compare cmp-seed-1" })).toBeChecked();
  await expect(page.getByText("1 run ticked: tick another to compare.")).toBeVisible();
  await page.getByRole("checkbox", { name: "Compare cmp-reward-only" }).check();
  await page.getByRole("link", { name: "Compare 2 runs" }).click();
  await expect(page).toHaveURL(/run=cmp-seed-1&run=cmp-reward-only/);
  await expect(chart(page, "reward").locator(".chart-surface")).toHaveAttribute("aria-label", /^reward: 2 lines/);
});

test("the runs list shows and sorts by a metric's last value and a config value, from its link", async ({ page }) => {
  // Each seeded run's reward at its last step (299), largest first.
  const last = { "cmp-seed-0": 2.99 + Math.sin(299) * 0.3, "cmp-seed-1": 2.99 + Math.sin(598) * 0.3,
    "cmp-reward-only": 2.99 + Math.sin(897) * 0.3 };
  const largestFirst = Object.entries(last).sort((a, b) => b[1] - a[1]).map(([id]) => id);
  const names = page.locator("table.run-table tbody tr td:nth-child(2)");
  const head = (name: string) => page.getByRole("columnheader").filter({ has: page.getByRole("button", { name, exact: true }) });

  await page.goto(`/?project=${PROJECT}`);
  await page.getByText("Add columns").click();
  await page.getByLabel("Show").selectOption("last");
  await page.getByRole("combobox", { name: /^Metric/ }).fill("reward");
  await page.getByRole("button", { name: "Add column" }).click();
  await page.getByLabel("Show").selectOption("config");
  // A key the column cannot name is refused with the reason, and nothing is added.
  await page.getByRole("combobox", { name: /^Config key/ }).fill("model name");
  await page.getByRole("button", { name: "Add column" }).click();
  await expect(page.getByRole("alert")).toContainText("config path");
  await page.getByRole("combobox", { name: /^Config key/ }).fill("lr");
  await page.getByRole("button", { name: "Add column" }).click();
  await expect(page.getByRole("columnheader")).toContainText(["Run", "reward (last)", "lr"]);

  await page.getByRole("button", { name: "reward (last)", exact: true }).click();
  await expect(head("reward (last)")).toHaveAttribute("aria-sort", "descending");
  await expect(names).toHaveText(largestFirst);
  const row = page.getByRole("row").filter({ hasText: largestFirst[0] });
  const shown = Number(await row.locator("td.summary-col").first().innerText());
  expect(Math.abs(shown - last[largestFirst[0] as keyof typeof last])).toBeLessThan(1e-3);
  await expect(page.getByRole("row").filter({ hasText: "cmp-reward-only" }).locator("td.summary-col").nth(1)).toHaveText("0.01");
  await page.getByRole("button", { name: "reward (last)", exact: true }).click();
  await expect(head("reward (last)")).toHaveAttribute("aria-sort", "ascending");
  await expect(names).toHaveText([...largestFirst].reverse());
  await expect(page).toHaveURL(/column=last%3Areward&column=config%3Alr&sort=last%3Areward&order=asc/);
  await expectNoA11yViolations(page);

  // The link is the view: reloaded, it is sorted the same, rendered by the server.
  await page.reload();
  await expect(names).toHaveText([...largestFirst].reverse());
  await page.getByRole("button", { name: "Remove column lr" }).click();
  await expect(page.getByRole("columnheader", { name: /lr/ })).toHaveCount(0);
  await expect(page).not.toHaveURL(/config%3Alr/);
  // A bad column in a pasted link says what is wrong instead of listing runs.
  await page.goto(`/?project=${PROJECT}&column=avg:reward`);
  await expect(page.getByRole("alert")).toContainText('"avg" is not a column kind');
});
