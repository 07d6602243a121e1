// A run's rollouts at once, on the demo loaded by scripts/e2e.sh: the heatmap of a
// value over the steps, the group lens and what changed at the PPO run's dip.
import { test, expect, type Page } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

const FLAT = "demo-grpo-flat";
const PPO = "demo-ppo-cartpole";

async function openTraces(page: Page, run: string) {
  await page.goto(`/runs/${run}?traces=1`);
  await expect(page.locator("[data-hydrated]")).toHaveCount(1);
}

test("Enter on a heatmap cell lists exactly that cell's traces", async ({ page, request }) => {
  await openTraces(page, FLAT);
  const map = page.getByRole("group", { name: /^attr\.reward by step, 12,800 traces/ });
  await expect(map).toBeVisible();
  // Its cells are drawn: one coloured rectangle per (bucket, bin) holding traces.
  expect(await page.locator("figure.heatmap").first().locator(".heatmap-cells rect").count()).toBeGreaterThan(200);
  await expectNoA11yViolations(page);
  // The keys move a focused cell: right along the steps, then from the lowest value
  // up to the first cell that holds traces.
  await map.focus();
  for (const key of ["ArrowRight", "ArrowRight", "ArrowRight"]) await map.press(key);
  for (let i = 0; i < 25; i++) await map.press("ArrowDown");
  const readout = page.locator("figure.heatmap").first().locator(".heatmap-readout");
  let count = 0;
  for (let i = 0; i < 25 && count === 0; i++) {
    await expect(readout).toContainText(/^step 3, attr\.reward .* to .*: \d+ traces?/);
    count = Number(((await readout.textContent()) ?? "").match(/: (\d+) traces?/)?.[1]);
    if (count === 0) await map.press("ArrowUp");
  }
  expect(count).toBeGreaterThan(0);
  await map.press("Enter");
  await expect(page).toHaveURL(/\/traces\?run_id=demo-grpo-flat&filter=attr\.reward%20%3E%3D%20.*&min_step=3&max_step=3/);
  // The workspace's filters are exactly the cell's: the API lists that many traces.
  const url = new URL(page.url());
  const api = await request.get(`/api/runs/${FLAT}/traces?${url.searchParams.toString()}&limit=500`);
  const listed = (await api.json()).traces as { step: number }[];
  expect(listed.length).toBe(count);
  expect(listed.every((t) => t.step === 3)).toBeTruthy();
  const rows = page.getByRole("list", { name: "Traces", exact: true }).getByRole("listitem");
  await expect(rows.first()).toBeVisible();
  await expect(page.getByRole("button", { name: "Clear step 3" })).toBeVisible();
});

test("a split draws one small heatmap per task family, each a link to its traces", async ({ page }) => {
  await openTraces(page, FLAT);
  await expect(page.getByRole("group", { name: /^attr\.reward by step/ })).toBeVisible();
  await page.getByLabel("Split by").selectOption("attr.task_family");
  const small = page.locator(".small-maps figure.heatmap");
  await expect(small).toHaveCount(4);
  await expect(small.locator("figcaption")).toHaveText([/: 3,200 traces/, /: 3,200 traces/, /: 3,200 traces/, /: 3,200 traces/]);
  await expect(small.locator("figcaption", { hasText: "code" })).toHaveCount(1);
  await expectNoA11yViolations(page);
  // A drag across the code family's map opens its traces of those steps.
  const code = small.filter({ has: page.locator("figcaption", { hasText: "code" }) }).getByRole("group");
  await code.scrollIntoViewIfNeeded();
  const box = await code.boundingBox();
  if (!box) throw new Error("no box for the code heatmap");
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.9);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.7, box.y + box.height * 0.1, { steps: 5 });
  await page.mouse.up();
  await expect(page).toHaveURL(/filter=attr\.task_family%20%3D%20code/);
  await expect(page).toHaveURL(/min_step=\d+&max_step=\d+/);
  const u = new URL(page.url());
  expect(Number(u.searchParams.get("max_step"))).toBeGreaterThan(Number(u.searchParams.get("min_step")));
});

test("the group lens shows zero-spread groups per step, and best against worst opens the diff", async ({ page }) => {
  await openTraces(page, FLAT);
  const lens = page.getByRole("region", { name: "Groups", exact: true });
  await expect(lens.getByRole("img", { name: /Share of groups with no spread/ })).toBeVisible();
  const table = lens.getByRole("table");
  await expect(table.locator("caption")).toHaveText("Step 199: 8 groups, least spread first");
  await expect(table.locator("tbody tr")).toHaveCount(8);
  // Least spread first: groups with none, then the rest by growing spread.
  const spreads = (await table.locator("tbody tr td:nth-child(4)").allTextContents())
    .map((s) => (s === "none" ? 0 : Number(s)));
  expect(spreads.every((s, i) => i === 0 || spreads[i - 1] <= s), `spreads ${spreads}`).toBeTruthy();
  await expectNoA11yViolations(page);
  // A pinned step lists that step's groups (200 markers overlap: pinned from the keys).
  const marker = page.getByRole("group", { name: "Trace activity per step" }).getByRole("button", { name: /^step 120:/ });
  await marker.focus();
  await marker.press("Enter");
  await expect(table.locator("caption")).toHaveText("Step 120: 8 groups, least spread first");
  const spread = table.locator("tbody tr").filter({ hasNot: page.locator("td:nth-child(4)", { hasText: /^none$/ }) }).first();
  await spread.getByRole("link", { name: /^Best against worst/ }).click();
  await expect(page).toHaveURL(/\/compare\?run_id=demo-grpo-flat&spans=.*&diff=1/);
  await expect(page.locator("ol.aligned > li").first()).toBeVisible();
  await expect(page.locator(".diff-head .side .side-tag")).toHaveText(["A", "B"]);
});

test("what changed at the PPO dip puts the simulator's failure first", async ({ page }) => {
  await openTraces(page, PPO);
  const panel = page.getByRole("region", { name: "What changed", exact: true });
  await panel.getByLabel("From step").fill("300");
  await panel.getByLabel("to").fill("340");
  await panel.getByRole("button", { name: "Compare with the steps before" }).click();
  await expect(panel.locator(".changes-head")).toContainText("Steps 300–340");
  const rows = panel.locator("ol.changes > li");
  await expect(rows.first()).toContainText("physics.integrate");
  await expect(rows.first()).toContainText("traces where it failed");
  const top = (await rows.locator(".subject").allTextContents()).slice(0, 4).join(" ");
  expect(top).toContain("FloatingPointError");
  expect(top).toContain("EpisodeAborted");
  await expect(panel.locator(".note")).toContainText("attr.seed");
  await expectNoA11yViolations(page);
  await rows.first().getByRole("link", { name: "Examples" }).click();
  await expect(page).toHaveURL(/filter=span\.name%20%3D%20physics\.integrate&filter=span\.status%20%3D%20error&min_step=300&max_step=340/);
  await expect(page.getByRole("list", { name: "Traces", exact: true }).getByRole("listitem").first()).toContainText("rollout step 3");
});

test("a drag across the timeline's steps asks what changed in them", async ({ page }) => {
  await openTraces(page, PPO);
  const plot = page.locator(".timeline-plot");
  await plot.scrollIntoViewIfNeeded();
  const [first, last] = ((await page.locator(".timeline .range").textContent()) ?? "")
    .match(/\d+/g)!
    .map(Number);
  const box = (await plot.boundingBox())!;
  const x = (step: number) => box.x + ((step - first) / (last - first)) * box.width;
  const y = box.y + box.height / 3;
  await page.mouse.move(x(300), y);
  await page.mouse.down();
  await page.mouse.move(x(320), y, { steps: 4 });
  // The range is named while it is dragged.
  await expect(page.locator(".drag-range")).toContainText(/steps \d+–\d+/);
  await page.mouse.move(x(340), y, { steps: 4 });
  await page.mouse.up();
  await expect(page).toHaveURL(/[?&]from=\d+&to=\d+/);
  const url = new URL(page.url());
  const [from, to] = [Number(url.searchParams.get("from")), Number(url.searchParams.get("to"))];
  expect(Math.abs(from - 300)).toBeLessThanOrEqual(2);
  expect(Math.abs(to - 340)).toBeLessThanOrEqual(2);
  const panel = page.getByRole("region", { name: "What changed", exact: true });
  await expect(panel.locator(".changes-head")).toContainText(`Steps ${from}–${to}`);
  await expect(panel.getByLabel("From step")).toHaveValue(String(from));
  await expect(panel.locator("ol.changes > li").first()).toContainText("physics.integrate");
  await expect(page.locator(".range-band")).toHaveCount(1);
  // No step was pinned by the drag's end.
  expect(url.searchParams.get("step")).toBeNull();
  // The link reopens the same comparison.
  await page.reload();
  await expect(page.locator("[data-hydrated]")).toHaveCount(1);
  await expect(panel.locator(".changes-head")).toContainText(`Steps ${from}–${to}`);
});
