import { test, expect, createRun, sendEvents, live, holdBundle } from "./fixtures";

const RUN = "e2e-filters";
const rollout = (i: number) => {
  const trace = `r${i}`;
  const events: object[] = [
    { op: "open", trace_id: trace, span_id: "root", name: `rollout ${i}`, kind: "rollout", ts: 1000 + i * 10,
      step: i, attributes: { reward: i / 10, task: i % 2 === 0 ? "math word" : "code" } },
  ];
  if (i % 3 === 1) {
    // Fails beneath; the root recovers.
    events.push(
      { op: "open", trace_id: trace, span_id: "tool", parent_span_id: "root", name: "tool call", kind: "tool", ts: 1001 + i * 10,
        attributes: { "tool.name": i === 4 ? "python" : "web search" } },
      { op: "close", trace_id: trace, span_id: "tool", status: "error", ts: 1002 + i * 10 },
    );
  }
  events.push({ op: "close", trace_id: trace, span_id: "root", status: "ok", ts: 1005 + i * 10 });
  return events;
};

test.beforeAll(async ({ request }) => {
  await createRun(request, RUN, "filters-e2e", "filtered run");
  await sendEvents(request, RUN, Array.from({ length: 8 }, (_, i) => rollout(i)).flat());
});

// Builds `span.attr.NAME OP VALUE` in the filter builder and adds it.
const addSpanAttributeFilter = async (page: import("@playwright/test").Page, name: string, op: string,
  value?: string) => {
  await page.getByLabel("Filter field").selectOption("span.attr.");
  await page.getByLabel("Span attribute name").fill(name);
  await page.getByLabel("Filter operator").selectOption(op);
  if (value !== undefined) await page.getByLabel("Filter value").fill(value);
  await page.getByRole("button", { name: "Add filter" }).click();
};

const names = async (page: import("@playwright/test").Page) =>
  (await page.getByRole("list", { name: "Traces", exact: true }).locator(".name").allTextContents()).sort();

test("a filter built in the builder narrows the list, rides the URL and survives a reload", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(8);
  await page.getByLabel("Filter field").selectOption("attr.reward");
  await page.getByLabel("Filter operator").selectOption("<");
  await page.getByLabel("Filter value").fill("0.35");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page).toHaveURL(/filter=attr\.reward%20%3C%200\.35/);
  await expect(list.getByRole("listitem")).toHaveCount(4);
  await expect(page.getByRole("list", { name: "Filters" })).toContainText("attr.reward < 0.35");
  await page.reload();
  await expect(list.getByRole("listitem")).toHaveCount(4);
  expect(await names(page)).toEqual(["rollout 0", "rollout 1", "rollout 2", "rollout 3"]);

  // Failed beneath, on top: the roots all recovered, the children did not.
  await page.getByLabel("Failed beneath").check();
  await expect(list.getByRole("listitem")).toHaveCount(1);
  await expect(list).toContainText("rollout 1");
  await page.getByRole("button", { name: "Remove filter attr.reward < 0.35" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(3);
  expect(await names(page)).toEqual(["rollout 1", "rollout 4", "rollout 7"]);

  // A bad value is named, and nothing changes.
  await page.getByLabel("Filter field").selectOption("attr.reward");
  await page.getByLabel("Filter operator").selectOption(">");
  await page.getByLabel("Filter value").fill("");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page.getByRole("alert")).toContainText("missing");
  await expect(list.getByRole("listitem")).toHaveCount(3);
});

test("span filters from the builder list the traces holding such a span", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(8);
  await expect(page.getByLabel("Filter operator")).toHaveValue(">");
  await page.getByLabel("Filter field").selectOption("span.name");
  // A span field is text: the operator turns to equality.
  await expect(page.getByLabel("Filter operator")).toHaveValue("=");
  await expect(page.getByLabel("Filter value")).toHaveAttribute("placeholder", "a name");
  await page.getByLabel("Filter value").fill("tool call");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page).toHaveURL(/filter=span\.name%20%3D%20%22tool%20call%22/);
  await expect(list.getByRole("listitem")).toHaveCount(3);
  await page.getByLabel("Filter field").selectOption("span.status");
  await expect(page.getByLabel("Filter value")).toHaveAttribute("placeholder", "ok, error …");
  await page.getByLabel("Filter value").fill("error");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page.getByRole("list", { name: "Filters" })).toContainText("span.status = error");
  await expect(list.getByRole("listitem")).toHaveCount(3);
  expect(await names(page)).toEqual(["rollout 1", "rollout 4", "rollout 7"]);
  // Both must hold on one span: no tool call here is ok.
  await page.getByRole("button", { name: "Remove filter span.status = error" }).click();
  await page.getByLabel("Filter field").selectOption("span.status");
  await page.getByLabel("Filter value").fill("ok");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(0);
  // A status outside the vocabulary is named, and nothing changes.
  await page.getByLabel("Filter field").selectOption("span.status");
  await page.getByLabel("Filter value").fill("fine");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page.getByRole("alert")).toContainText('span.status "fine" is not a valid');
});

test("a span attribute filter from the builder names its attribute in a box of its own", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(8);
  const name = page.getByLabel("Span attribute name");
  await expect(name).toBeHidden();
  await page.getByLabel("Filter field").selectOption("span.attr.");
  await expect(name).toBeVisible();
  await expect(page.getByLabel("Filter operator")).toHaveValue("=");
  // No name yet: the grammar says what is missing, and nothing changes.
  await page.getByLabel("Filter value").fill("web search");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page.getByRole("alert")).toContainText("span.attr. needs an attribute name");
  await expect(list.getByRole("listitem")).toHaveCount(8);
  // The names a sample of the run's spans carry are offered, and a named one's values.
  await expect(page.locator('#span-attribute-names option[value="tool.name"]')).toHaveCount(1);
  await expect(page.locator('#span-attribute-names option[value="reward"]')).toHaveCount(1);
  await name.fill("tool.name");
  await expect(page.getByLabel("Filter value")).toHaveAttribute("placeholder", "text");
  await expect(page.locator('#filter-values option[value="web search"]')).toHaveCount(1);
  await expect(page.locator('#filter-values option[value="python"]')).toHaveCount(1);
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page).toHaveURL(/filter=span\.attr\.tool\.name%20%3D%20%22web%20search%22/);
  await expect(page.getByRole("list", { name: "Filters" })).toContainText('span.attr.tool.name = "web search"');
  await expect(list.getByRole("listitem")).toHaveCount(2);
  expect(await names(page)).toEqual(["rollout 1", "rollout 7"]);
  await page.screenshot({ path: "test-results/span-attribute-filter.png" });
  // A span number over a bound: the rollouts whose root span carries a reward of 0.5 up.
  await page.getByRole("button", { name: 'Remove filter span.attr.tool.name = "web search"' }).click();
  await expect(list.getByRole("listitem")).toHaveCount(8);
  await addSpanAttributeFilter(page, "reward", ">=", "0.5");
  await expect(page).toHaveURL(/filter=span\.attr\.reward%20%3E%3D%200\.5/);
  await expect(list.getByRole("listitem")).toHaveCount(3);
  expect(await names(page)).toEqual(["rollout 5", "rollout 6", "rollout 7"]);
  await expect(page.getByRole("status").filter({ hasText: "match" })).toHaveText("3 traces match");
  await page.screenshot({ path: "test-results/span-number-filter.png" });
  // A name's presence, whatever its values: the rollouts with a tool call carry tool.name.
  await page.getByRole("button", { name: "Remove filter span.attr.reward >= 0.5" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(8);
  await addSpanAttributeFilter(page, "tool.name", "exists");
  await expect(page).toHaveURL(/filter=span\.attr\.tool\.name%20exists/);
  await expect(list.getByRole("listitem")).toHaveCount(3);
  expect(await names(page)).toEqual(["rollout 1", "rollout 4", "rollout 7"]);
  await expect(page.getByRole("status").filter({ hasText: "match" })).toHaveText("3 traces match");
  await page.screenshot({ path: "test-results/span-exists-filter.png" });
});

// "Failed beneath" means a failed span under a root that did not fail: a trace whose
// root failed is not listed, and the Status picker shows the root's status it sets.
test("failed beneath lists recovered roots only, and shows it in the status picker", async ({ page, request }) => {
  const run = "e2e-beneath";
  await createRun(request, run, "beneath-e2e", "beneath run");
  const trace = (id: string, root: string, child: string | null) => [
    { op: "open", trace_id: id, span_id: "root", name: `trace ${id}`, kind: "rollout", ts: 1 },
    ...(child ? [
      { op: "open", trace_id: id, span_id: "c", parent_span_id: "root", name: "tool", kind: "tool", ts: 2 },
      { op: "close", trace_id: id, span_id: "c", status: child, ts: 3 },
    ] : []),
    { op: "close", trace_id: id, span_id: "root", status: root, ts: 4 },
  ];
  await sendEvents(request, run, [...trace("recovered", "ok", "error"), ...trace("failed", "error", "error"),
    ...trace("clean", "ok", null)]);
  await page.goto(`/traces?run_id=${run}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(3);
  await expect(page.getByRole("status").filter({ hasText: "traces match" })).toHaveText("3 traces match");
  await page.getByLabel("Failed beneath").check();
  await expect(page).toHaveURL(/status=ok/);
  await expect(page).toHaveURL(/filter=error_count%20%3E%200/);
  await expect(list.getByRole("listitem")).toHaveCount(1);
  await expect(list).toContainText("trace recovered");
  await expect(page.getByRole("status").filter({ hasText: "match" })).toHaveText("1 trace matches");
  // The Status picker says what the switch set.
  await expect(page.getByText("Status: completed", { exact: true })).toBeVisible();
  await page.getByText("Status: completed", { exact: true }).click();
  await expect(page.getByRole("group", { name: "Status" }).getByLabel("completed")).toBeChecked();
  await page.getByLabel("Failed beneath").uncheck();
  await expect(list.getByRole("listitem")).toHaveCount(3);
  await expect(page).not.toHaveURL(/status=/);
});

test("rows say their step and what tells them apart, with nothing pinned", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  const row = list.getByRole("listitem").filter({ hasText: "rollout 3" });
  await expect(row.locator(".line2")).toContainText("step 3");
  // reward and task differ between the rollouts: shown without a pinned column.
  await expect(row.locator(".line3")).toContainText("reward 0.3");
  await expect(row.locator(".line3")).toContainText("task code");
});

// The switch's label once took the span tree's toggle width (18 px), so the filter
// builder covered all of it but "Fai".
test("the failed-beneath switch reads in full, clear of the filter builder", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const label = page.locator("label", { hasText: "Failed beneath" });
  await expect(label).toBeVisible();
  expect(await label.evaluate((e) => e.scrollWidth - e.clientWidth)).toBe(0);
  const l = (await label.boundingBox())!;
  const f = (await page.getByRole("form", { name: "Add a filter" }).boundingBox())!;
  expect(l.x + l.width <= f.x || l.y + l.height <= f.y).toBe(true);
});

test("the list sorts by a root attribute and pins it as a column", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await page.getByLabel("Sort by").selectOption("attr.reward");
  await expect(page).toHaveURL(/sort=attr\.reward/);
  await expect(list.locator(".name").first()).toHaveText("rollout 7");
  await page.getByLabel("Sort order").selectOption("asc");
  await expect(page).toHaveURL(/order=asc/);
  await expect(list.locator(".name").first()).toHaveText("rollout 0");
  await page.getByText(/^Columns:/).click();
  await page.getByRole("group", { name: "Columns" }).getByLabel("reward").check();
  await expect(page).toHaveURL(/cols=reward/);
  await expect(list.getByRole("listitem").first().locator(".line3")).toContainText("reward 0");
  await expect(list.getByRole("listitem").nth(7).locator(".line3")).toContainText("reward 0.7");
});

test("a project picker scopes the list, and a run is found by a piece of its name", async ({ page }) => {
  await page.goto("/traces");
  await page.getByLabel("Project").selectOption("filters-e2e");
  await expect(page).toHaveURL(/project=filters-e2e/);
  const runs = page.getByRole("combobox", { name: "Run", exact: true });
  await expect(runs.locator("option")).toHaveText(["All runs of the project", "filtered run — filters-e2e"]);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(8);

  await page.goto("/traces");
  const find = page.getByLabel("Find a run");
  await find.fill("filtered r");
  await expect(page.locator("#run-matches option")).toHaveCount(1);
  await find.fill("e2e-filters");
  await expect(page.locator("#run-matches option")).toHaveCount(1);
  await find.press("Tab");
  await expect(page).toHaveURL(/run_id=e2e-filters/);
  await expect(runs).toHaveValue("e2e-filters");
});

test("a time window scopes browsing across runs and says which applies", async ({ page }) => {
  await page.goto("/traces?project=filters-e2e");
  const list = page.getByRole("list", { name: "Traces", exact: true });
  // Its name is the label and the chosen option ("Window Last hour").
  const picker = page.getByRole("combobox", { name: /^Window/ });
  await expect(list.getByRole("listitem")).toHaveCount(8);
  await expect(page.locator(".window")).toHaveText("updated in the last 7 days");

  await picker.selectOption("1h");
  await expect(page).toHaveURL(/window=1h/);
  await expect(page.locator(".window")).toHaveText("updated in the last hour");
  await expect(list.getByRole("listitem")).toHaveCount(8);

  // A range long before these traces were sent holds none of them.
  await picker.selectOption("range");
  await expect(page).toHaveURL(/window=range&from=/);
  await page.getByRole("textbox", { name: "From (UTC)" }).fill("2020-01-01T00:00");
  await expect(page).toHaveURL(/from=2020-01-01T00%3A00/);
  await page.getByRole("textbox", { name: "To (UTC)" }).fill("2020-01-02T00:00");
  await expect(page).toHaveURL(/to=2020-01-02T00%3A00/);
  await expect(page.locator(".window")).toHaveText("2020-01-01 00:00:00 UTC – 2020-01-02 00:00:59 UTC");
  await expect(list.getByRole("listitem")).toHaveCount(0);
  await page.reload();
  await expect(page.locator(".window")).toContainText("2020-01-01 00:00:00 UTC");
  await expect(picker).toHaveValue("range");

  // A run's traces narrow the same way; "Whole run" lists them all again.
  await page.goto(`/traces?run_id=${RUN}&window=range&from=2020-01-01T00%3A00&to=2020-01-02T00%3A00`);
  await expect(list.getByRole("listitem")).toHaveCount(0);
  await expect(page.getByText("This run has no traces matching these filters in this window.")).toBeVisible();
  await expect(page.locator(".window")).toHaveText("2020-01-01 00:00:00 UTC – 2020-01-02 00:00:59 UTC");
  await picker.selectOption({ label: "Whole run" });
  await expect(page).not.toHaveURL(/window=/);
  await expect(list.getByRole("listitem")).toHaveCount(8);
  await expect(page.locator(".window")).toHaveText(`all traces of run ${RUN}`);
  await picker.selectOption("1h");
  await expect(page.locator(".window")).toHaveText("updated in the last hour");
  await expect(list.getByRole("listitem")).toHaveCount(8);
});

test("changing the address while the list reloads keeps the page working", async ({ page }) => {
  await page.goto("/traces?project=filters-e2e");
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(8);
  // A slow server: each list answers late, so the rows on screen outlive the list
  // they came from while the address changes again and again.
  await page.route("**/api/traces?*", async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 400));
    await route.continue();
  });
  const picker = page.getByRole("combobox", { name: /^Window/ });
  for (const window of ["1h", "1d", "range", "7d", "1h"]) {
    await picker.selectOption(window);
    await page.waitForTimeout(150);
  }
  await picker.selectOption("range");
  await page.getByRole("textbox", { name: "From (UTC)" }).fill("2020-01-01T00:00");
  await page.getByRole("textbox", { name: "To (UTC)" }).fill("2020-01-02T00:00");
  await picker.selectOption("1d");
  await expect(page.locator(".window")).toHaveText("updated in the last 24 hours");
  await expect(list.getByRole("listitem")).toHaveCount(8);
});

test.describe("before hydration", () => {
  // goto must not wait for the page to go live: the test holds the bundle back.
  test.use({ untilLive: false });

  test("what a reader types and chooses while the page loads is kept once it hydrates", async ({ page }) => {
    const release = await holdBundle(page);
    await page.goto(`/traces?run_id=${RUN}`);
    await page.getByLabel("Filter field").selectOption("attr.reward");
    await page.getByLabel("Filter operator").selectOption("<");
    await page.getByLabel("Filter value").fill("0.35");
    await page.getByLabel("Search").fill("a b c d e f g h i");
    await page.getByLabel("Find a run").fill("filtered r");
    release();
    await live(page);
    // The search box kept its text, and the page counts its terms.
    await expect(page.getByText("9 terms: at most 8 are allowed")).toBeVisible();
    await expect(page.getByLabel("Search")).toHaveValue("a b c d e f g h i");
    // The run finder looks up what was typed.
    await expect(page.locator("#run-matches option")).toHaveCount(1);
    // The builder adds the filter that was chosen, not its defaults.
    await expect(page.getByLabel("Filter value")).toHaveValue("0.35");
    await page.getByRole("button", { name: "Add filter" }).click();
    await expect(page).toHaveURL(/filter=attr\.reward%20%3C%200\.35/);
    await expect(page.getByRole("list", { name: "Traces", exact: true }).getByRole("listitem")).toHaveCount(4);
  });
});
