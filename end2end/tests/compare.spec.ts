import { test, expect } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

// On the demo's GRPO run (scripts/e2e.sh loads it): each prompt's trace has four
// sampled solutions as children, each with its reward.
const RUN = "demo-grpo-agent";

type Span = { span_id: string; name: string; attributes?: Record<string, unknown> };

/** A group whose samples got both rewards: its trace, root, a winner and a loser. */
async function mixedGroup(request: import("@playwright/test").APIRequestContext) {
  const list = await (await request.get(`/api/runs/${RUN}/traces?kind=rollout&limit=100`)).json();
  for (const t of list.traces) {
    const rewards: string[] = t.attributes.rewards ?? [];
    if (!(rewards.includes("1.0") && rewards.includes("0.0"))) continue;
    const page = await (
      await request.get(`/api/runs/${RUN}/traces/${t.trace_id}/spans?parent_span_id=${t.root_span_id}`)
    ).json();
    const samples: Span[] = [];
    for (const s of page.spans as Span[]) {
      samples.push(await (await request.get(`/api/runs/${RUN}/traces/${t.trace_id}/spans/${s.span_id}`)).json());
    }
    const winner = samples.find((s) => s.attributes?.reward === 1);
    const loser = samples.find((s) => s.attributes?.reward === 0);
    if (winner && loser) return { trace: t.trace_id as string, root: t.root_span_id as string, winner, loser };
  }
  throw new Error("the demo has no group with both rewards");
}

test("a group's four samples compare side by side, best and worst by reward", async ({ page, request }) => {
  const g = await mixedGroup(request);
  // The way in: the inspector of the group's root offers its children.
  await page.goto(`/traces?run_id=${RUN}&trace_id=${g.trace}&span_id=${g.root}`);
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  await inspector.getByRole("link", { name: "Compare its 4 children" }).click();
  await expect(page).toHaveURL(/\/compare\?/);
  const columns = page.locator(".compare-column");
  await expect(columns).toHaveCount(4);
  await expect(columns.first()).toContainText("solver sample 0");
  // Columns of spans that share their name's shape say what tells them apart.
  await expect(columns.locator(".distinct")).toHaveCount(4);
  await expect(columns.locator(".distinct").first()).toContainText("reward");
  // Rank by reward: one column is the best, one the worst, and reward differs.
  await page.getByRole("navigation", { name: "Comparison" }).getByRole("link", { name: "reward", exact: true }).click();
  await expect(page).toHaveURL(/by=reward/);
  await expect(page.locator(".rank.best")).toHaveCount(1);
  await expect(page.locator(".rank.worst")).toHaveCount(1);
  await expect(columns.first().locator("tr.differs", { hasText: "reward" })).toHaveCount(1);
  await page.getByRole("link", { name: "best first" }).click();
  await expect(columns.first().locator(".rank.best")).toHaveCount(1);
  await expectNoA11yViolations(page);
});

test("a winner and a loser diff level by level, and the link reopens the same view", async ({ page, request, context }) => {
  const g = await mixedGroup(request);
  const url = `/compare?run_id=${RUN}&spans=${g.trace}:${g.winner.span_id},${g.trace}:${g.loser.span_id}&diff=1`;
  await page.goto(url);
  const rows = page.locator("ol.aligned > li");
  await expect(rows.first()).toBeVisible();
  // Each side says which it is and what tells it apart: the winner is A.
  const sides = page.locator(".diff-head .side");
  await expect(sides.locator(".side-tag")).toHaveText(["A", "B"]);
  await expect(sides.first().locator(".distinct")).toContainText("reward 1");
  await expect(sides.last().locator(".distinct")).toContainText("reward 0");
  // The reward step pairs up; its bodies differ where the reward does.
  const reward = rows.filter({ hasText: "reward.exact_match" });
  await expect(reward).toHaveCount(1);
  await expect(reward.locator(".change-label")).toHaveText("changed");
  await reward.getByRole("link", { name: "bodies" }).click();
  await expect(page).toHaveURL(/pair=/);
  const bodies = page.getByRole("region", { name: "Body diff" });
  await expect(bodies.locator("code", { hasText: "$.reward" })).toBeVisible();
  // The first iteration opens to its own children, aligned in turn; its model
  // call's transcript is diffed as text.
  await rows.getByRole("link", { name: "▸ children" }).first().click();
  await expect(page).toHaveURL(/open=/);
  const opened = rows.filter({ has: page.getByRole("link", { name: "▾ children" }) });
  await expect(opened).toHaveCount(1);
  const nested = opened.locator(".nested ol.aligned > li");
  await expect(nested.first()).toBeVisible();
  const chat = nested.filter({ hasText: "policy.chat" }).first();
  await chat.getByRole("link", { name: "bodies" }).click();
  await expect(bodies.locator("h3", { hasText: "input" })).toBeVisible();

  // The link, pasted into a new page, renders the same comparison on the server.
  const link = page.url();
  const html = await (await request.get(link)).text();
  expect(html).toContain("reward.exact_match");
  const again = await context.newPage();
  await again.goto(link);
  await expect(again.locator(".nested ol.aligned > li").first()).toBeVisible();
  await expect(again.getByRole("region", { name: "Body diff" }).locator("h3", { hasText: "input" })).toBeVisible();
  await expectNoA11yViolations(page);
});

test("a compared span that does not exist is named as missing", async ({ page, request }) => {
  const g = await mixedGroup(request);
  await page.goto(`/compare?run_id=${RUN}&spans=${g.trace}:${g.winner.span_id},${g.trace}:nope`);
  await expect(page.locator(".compare-column")).toHaveCount(2);
  await expect(page.getByRole("alert")).toContainText(`missing: span nope is not in trace ${g.trace}`);
});

test("a pinned step offers to compare its traces", async ({ page }) => {
  await page.goto(`/runs/${RUN}?step=50`);
  const link = page.getByRole("link", { name: "Compare this step's traces" });
  await link.click();
  await expect(page).toHaveURL(/step=50/);
  await expect(page.locator(".compare-column").first()).toBeVisible();
  expect(await page.locator(".compare-column").count()).toBeGreaterThanOrEqual(2);
});

test("traces ticked in a run's list open side by side", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&q=eval`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("link").first()).toBeVisible();
  await page.getByRole("button", { name: "Select to compare" }).click();
  const boxes = list.getByRole("checkbox");
  await boxes.nth(0).check();
  await boxes.nth(1).check();
  await page.getByRole("link", { name: "Compare 2" }).click();
  await expect(page).toHaveURL(/\/compare\?run_id=demo-grpo-agent&spans=/);
  await expect(page.locator(".compare-column")).toHaveCount(2);
  await expect(page.locator(".compare-column").first()).toContainText("eval");
});

// A figure for the README, not a timed assertion: eight sampled solutions (two
// groups of four) as columns, from the request until the page answers a click.
test("eight samples as columns: time to rendered and hydrated", async ({ page, request }) => {
  const list = await (await request.get(`/api/runs/${RUN}/traces?kind=rollout&limit=2`)).json();
  const spans: string[] = [];
  for (const t of list.traces) {
    const children = await (
      await request.get(`/api/runs/${RUN}/traces/${t.trace_id}/spans?parent_span_id=${t.root_span_id}`)
    ).json();
    for (const s of children.spans) spans.push(`${t.trace_id}:${s.span_id}`);
  }
  expect(spans.length).toBe(8);
  const started = Date.now();
  await page.goto(`/compare?run_id=${RUN}&spans=${spans.join(",")}`);
  await expect(page.locator(".compare-column")).toHaveCount(8);
  const rendered = Date.now() - started;
  // A click that only the hydrated page answers (it changes the URL in place).
  await page.getByRole("navigation", { name: "Comparison" }).getByRole("link", { name: "reward", exact: true }).click();
  await expect(page.locator(".rank.best")).toHaveCount(1);
  const hydrated = Date.now() - started;
  console.log(`compare, 8 columns: shown in ${rendered} ms, answering clicks in ${hydrated} ms`);
});
