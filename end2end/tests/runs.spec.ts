import type { Locator, Page } from "@playwright/test";
import { test, expect, createRun, sendEvents, holdBundle } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

test.beforeAll(async ({ request }) => {
  await createRun(request, "e2e-ppo", "cartpole", "ppo-seed-1");
  await createRun(request, "e2e-grpo", "math-agent", "grpo-run-7");
  await createRun(request, "e2e-umlaut", "cartpole", "Ölmühle-seed-3");
  await sendEvents(request, "e2e-ppo", [
    { op: "open", trace_id: "t1", span_id: "root", name: "rollout 1", kind: "rollout", ts: 1, step: 1 },
    { op: "close", trace_id: "t1", span_id: "root", status: "error", ts: 5 },
  ]);
});

test("the runs page renders on the server and hydrates", async ({ page }) => {
  await page.goto("/");
  const table = page.getByRole("table");
  await expect(table.getByRole("row", { name: /ppo-seed-1/ })).toBeVisible();
  await expect(table.getByRole("row", { name: /grpo-run-7/ })).toBeVisible();
  // Typing narrows the list only once the wasm has taken over the page.
  await page.getByLabel("Filter runs").fill("grpo");
  await expect(table.getByRole("row", { name: /ppo-seed-1/ })).toHaveCount(0);
  await expect(table.getByRole("row", { name: /grpo-run-7/ })).toBeVisible();
  // Other runs (the demo's) may match too: the counter agrees with the rows shown.
  const shown = await table.locator("tbody").getByRole("row").count();
  await expect(page.getByText(new RegExp(`^${shown} of \\d+ runs$`))).toBeVisible();
  // Case does not matter, beyond ASCII too.
  await page.getByLabel("Filter runs").fill("ÖLMÜHLE");
  await expect(table.getByRole("row", { name: /Ölmühle-seed-3/ })).toBeVisible();
  await expect(table.getByRole("row", { name: /grpo-run-7/ })).toHaveCount(0);
  await page.getByLabel("Filter runs").fill("GRPO-Run");
  await expect(table.getByRole("row", { name: /grpo-run-7/ })).toBeVisible();
  await page.getByLabel("Filter runs").fill("");
  await expect(table.getByRole("row", { name: /ppo-seed-1/ })).toBeVisible();
  await expectNoA11yViolations(page);
});

/** `row`'s cell under the column headed `title`, found by its head. */
async function cellUnder(page: Page, row: Locator, title: string): Promise<Locator> {
  const heads = (await page.getByRole("table").getByRole("columnheader").allTextContents()).map((h) => h.trim());
  const index = heads.indexOf(title);
  expect(index, `column ${title} in ${heads}`).toBeGreaterThanOrEqual(0);
  return row.getByRole("cell").nth(index);
}

test("a run shows its trace and failed-trace counts", async ({ page }) => {
  await page.goto("/");
  const row = page.getByRole("row", { name: /ppo-seed-1/ });
  await expect(await cellUnder(page, row, "Traces")).toHaveText("1");
  await expect(await cellUnder(page, row, "Failed")).toHaveText("1");
});

// A run whose rollouts failed, apart from one whose flaky tool failed beneath roots
// that recovered: the two read differently in the list.
test("the runs list tells failed roots from failures beneath", async ({ page, request }) => {
  await createRun(request, "e2e-beneath-runs", "cartpole", "flaky-tool-run");
  const events: object[] = [];
  for (let i = 0; i < 4; i++) {
    const trace = `b${i}`;
    events.push({ op: "open", trace_id: trace, span_id: "root", name: `rollout ${i}`, kind: "rollout", ts: 10 + i });
    events.push({ op: "open", trace_id: trace, span_id: "tool", parent_span_id: "root", name: "tool", kind: "tool", ts: 11 + i });
    events.push({ op: "close", trace_id: trace, span_id: "tool", status: "error", ts: 12 + i });
    events.push({ op: "close", trace_id: trace, span_id: "root", status: i === 0 ? "error" : "ok", ts: 13 + i });
  }
  await sendEvents(request, "e2e-beneath-runs", events);
  await page.goto("/");
  const table = page.getByRole("table");
  await expect(table.getByRole("columnheader", { name: "Failed", exact: true })).toBeVisible();
  await expect(table.getByRole("columnheader", { name: "Failed beneath" })).toBeVisible();
  const row = table.getByRole("row", { name: /flaky-tool-run/ });
  await expect(await cellUnder(page, row, "Traces")).toHaveText("4");
  await expect(await cellUnder(page, row, "Failed")).toHaveText("1");
  await expect(await cellUnder(page, row, "Failed beneath")).toHaveText("3");
  // Run Detail says the same.
  await page.goto("/runs/e2e-beneath-runs");
  await expect(page.locator(".facts")).toContainText("4 (1 failed, 3 with failures beneath)");
});

/** A size as the dashboard writes it ("812 B", "4.07 MB"), in bytes. */
function bytesOf(text: string): number {
  const m = /^(\d+(?:\.\d+)?) (B|kB|MB|GB)$/.exec(text.trim());
  expect(m, `a size: ${text}`).not.toBeNull();
  return Number(m![1]) * { B: 1, kB: 1e3, MB: 1e6, GB: 1e9 }[m![2] as "B"];
}

test("each run's size on disk reads in the list, above it and in Run Detail", async ({ page, request }) => {
  await createRun(request, "e2e-sized-chat", "sizes-e2e", "chat bodies");
  await createRun(request, "e2e-sized-bare", "sizes-e2e", "bare spans");
  const prompt = "Summarise the episode and say which move lost the reward. ".repeat(400);
  for (const [run, body] of [["e2e-sized-chat", prompt], ["e2e-sized-bare", null]] as const) {
    const events: object[] = [];
    for (let i = 0; i < 5; i++) {
      events.push({ op: "open", trace_id: `s${i}`, span_id: "root", name: `rollout ${i}`, kind: "rollout", ts: 1, step: i,
                    ...(body ? { input: { messages: [{ role: "user", content: `${i}: ${body}` }] } } : {}) });
      events.push({ op: "close", trace_id: `s${i}`, span_id: "root", status: "ok", ts: 2 });
    }
    await sendEvents(request, run, events);
  }
  await page.goto("/?project=sizes-e2e");
  const table = page.getByRole("table");
  await expect(table.getByRole("columnheader", { name: "Size" })).toBeVisible();
  const chat = bytesOf(await (await cellUnder(page, table.getByRole("row", { name: /chat bodies/ }), "Size")).innerText());
  const bare = bytesOf(await (await cellUnder(page, table.getByRole("row", { name: /bare spans/ }), "Size")).innerText());
  // Five prompts of 24 kB each weigh far more than five bare rollouts.
  expect(chat).toBeGreaterThan(100_000);
  expect(chat).toBeGreaterThan(10 * bare);
  const total = bytesOf((await page.locator(".disk-size").innerText()).replace(" on disk", ""));
  expect(total).toBeGreaterThanOrEqual(chat);
  await page.goto("/runs/e2e-sized-chat");
  const facts = page.locator(".facts");
  await expect(facts.locator("dt", { hasText: "Size" })).toBeVisible();
  expect(bytesOf(await facts.locator("dt:has-text('Size') + dd").innerText())).toBeGreaterThan(100_000);
});

test.describe("before hydration", () => {
  // goto must not wait for the page to go live: the test holds the bundle back.
  test.use({ untilLive: false });

  test("what a reader types before the page hydrates stays and filters the list", async ({ page }) => {
    // Typed while the bundle is held back: on the server-rendered page.
    const release = await holdBundle(page);
    await page.goto("/");
    const table = page.getByRole("table");
    await expect(table.getByRole("row", { name: /ppo-seed-1/ })).toBeVisible();
    await page.getByLabel("Filter runs").fill("grpo");
    release();
    await expect(table.getByRole("row", { name: /ppo-seed-1/ })).toHaveCount(0);
    await expect(table.getByRole("row", { name: /grpo-run-7/ })).toBeVisible();
    await expect(page.getByLabel("Filter runs")).toHaveValue("grpo");
  });
});

test("a project's retention policy reads above its runs", async ({ page, request }) => {
  await createRun(request, "e2e-retained", "retention-e2e", "kept a month");
  const set = await request.put("/api/projects/retention-e2e/retention", {
    data: { traces_days: 30, metrics: "keep" },
  });
  expect(set.status()).toBe(200);
  await page.goto("/?project=retention-e2e");
  await expect(page.getByText("Retention: traces kept 30 days, metrics kept")).toBeVisible();
  await page.screenshot({ path: "test-results/runs-retention.png", fullPage: false });
  // A project without a policy says nothing of it.
  await page.goto("/?project=cartpole");
  await expect(page.getByRole("table").getByRole("row", { name: /ppo-seed-1/ })).toBeVisible();
  await expect(page.getByText(/^Retention:/)).toHaveCount(0);
});
