import { test, expect, createRun, sendEvents } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

const RUN = "e2e-ws";
const FAN_RUN = "e2e-ws-fan";
const open = (trace: string, span: string, parent: string | null, name: string, kind: string, ts: number, extra: object = {}) =>
  ({ op: "open", trace_id: trace, span_id: span, parent_span_id: parent, name, kind, ts, ...extra });
const close = (trace: string, span: string, status: string, ts: number, extra: object = {}) =>
  ({ op: "close", trace_id: trace, span_id: span, status, ts, ...extra });

test.beforeAll(async ({ request }) => {
  await createRun(request, RUN, "workspace-e2e", "agent-eval");
  const chain = ["root", "lvl1", "lvl2", "lvl3", "lvl4", "lvl5"];
  const deep = chain.flatMap((span, i) => [
    open("deep", span, i === 0 ? null : chain[i - 1], `step ${span}`, i === 0 ? "agent" : "iteration", 1000 + i,
      i === 0 ? { input: { task: "sum the list" } } : {}),
  ]);
  deep.push(
    open("deep", "chat", "lvl5", "llm call", "model", 1010, {
      input: { messages: [{ role: "system", content: "be brief" }, { role: "user", content: "<b>2+2?</b>" }] },
    }),
    close("deep", "chat", "ok", 1020, { output: { role: "assistant", content: "4" }, token_count: 7 }),
    ...chain.slice().reverse().map((span, i) => close("deep", span, "ok", 1100 + i)),
  );
  await sendEvents(request, RUN, deep);
  const many = [open("wide", "root", null, "wide rollout", "rollout", 1)];
  for (let i = 0; i < 30; i++) many.push(open("wide", `child${i}`, "root", `env step ${i}`, "env_step", 10 + i));
  many.push(close("wide", "child3", "error", 50, { error: { type: "EnvError", message: "reset failed" } }));
  many.push(close("wide", "root", "error", 60));
  await sendEvents(request, RUN, many);
  const fan = [open("fan", "root", null, "fan-out", "agent", 1)];
  for (let i = 0; i < 450; i++) fan.push(open("fan", `c${i}`, "root", `tool call ${i}`, "tool", 10 + i));
  fan.push(close("fan", "root", "ok", 1000));
  // In a run of its own: the other tests count this run's traces.
  await createRun(request, FAN_RUN, "fan-e2e", "one large node");
  await sendEvents(request, FAN_RUN, fan);
});

test("scrolling toward the end of a large node reads its next pages, without a click", async ({ page }) => {
  const reads: string[] = [];
  page.on("request", (r) => {
    if (r.url().includes("/traces/fan/spans") && r.url().includes("parent_span_id=root")) reads.push(r.url());
  });
  await page.goto(`/traces?run_id=${FAN_RUN}&trace_id=fan&span_id=root`);
  const tree = page.getByRole("tree");
  await expect(tree.getByRole("treeitem", { name: /fan-out/ })).toHaveAttribute("aria-expanded", "true");
  // 450 children, 200 to a page: the first came with the page, two more are read
  // as the tree is scrolled to its end (again and again until the page answers).
  const last = tree.getByRole("treeitem", { name: /tool call 449\b/ });
  await expect(async () => {
    await tree.evaluate((el) => el.scrollTo(0, el.scrollHeight));
    await expect(last).toBeVisible({ timeout: 500 });
  }).toPass();
  await expect(tree.locator(".more-row")).toHaveCount(0);
  expect(reads).toHaveLength(2);
});

test("a reader jumps to child N of a large node, reads back, and finds children by name", async ({ page }) => {
  await page.goto(`/traces?run_id=${FAN_RUN}&trace_id=fan&span_id=root`);
  const tree = page.getByRole("tree");
  const bar = tree.locator(".jump-row");
  await expect(bar).toContainText("1–200 of 450");
  const goTo = bar.getByRole("spinbutton", { name: "Go to child number" });
  await goTo.fill("400");
  await goTo.press("Enter");
  await expect(bar).toContainText("400–450 of 450");
  // Child 400 is the first row under the bar; the 399 before it wait above.
  const rows = tree.getByRole("treeitem");
  await expect(rows.nth(2)).toContainText("load 200 earlier (399 before)");
  await expect(rows.nth(3)).toContainText("tool call 399");
  await tree.getByRole("button", { name: /load 200 earlier/ }).click();
  await expect(bar).toContainText("200–450 of 450");
  await expect(tree.getByRole("button", { name: "load 199 earlier (199 before)" })).toBeVisible();

  const find = bar.getByRole("searchbox", { name: "Find children by name" });
  await find.fill("call 44");
  await find.press("Enter");
  await expect(bar).toContainText("11 matching “call 44”");
  await expect(tree.getByRole("treeitem", { name: /tool call 44\d?\b/ })).toHaveCount(11);
  await expect(tree.getByRole("treeitem", { name: /tool call 0\b/ })).toHaveCount(0);
  await expectNoA11yViolations(page);
  await bar.getByRole("button", { name: "show all" }).click();
  await expect(bar).toContainText("1–200 of 450");
  await expect(tree.getByRole("treeitem", { name: /tool call 0\b/ })).toBeVisible();
});

test("a link to child 400 of 450 opens the tree on it", async ({ page, request }) => {
  const url = `/traces?run_id=${FAN_RUN}&trace_id=fan&span_id=c399`;
  const html = await (await request.get(url)).text();
  expect(html).toMatch(/id="node-c399"[^>]*aria-selected="true"/);
  await page.goto(url);
  const tree = page.getByRole("tree");
  const row = tree.getByRole("treeitem", { name: /tool call 399\b/ });
  await expect(row).toHaveAttribute("aria-selected", "true");
  await expect(row).toBeInViewport();
  // The page around it: from child 300, with the 299 before it a click away
  // (scrolled again until hydrated: hydration opens the tree on the linked row).
  await expect(async () => {
    await tree.evaluate((el) => el.scrollTo(0, 0));
    await expect(tree.locator(".jump-row")).toContainText("300–450 of 450", { timeout: 500 });
  }).toPass();
  await expect(tree.getByRole("button", { name: "load 200 earlier (299 before)" })).toBeVisible();
});

test("a deep link server-renders and reopens a span five levels deep", async ({ page, request }) => {
  const url = `/traces?run_id=${RUN}&trace_id=deep&span_id=lvl5`;
  // The selection is in the server's HTML, before any script runs: the tree's row and
  // the inspector, on every request. The inspector was once left loading on most
  // requests, and its hydration then sometimes panicked (client_data.rs).
  for (let i = 0; i < 8; i++) {
    const html = await (await request.get(url)).text();
    expect(html).toMatch(/id="node-lvl5"[^>]*aria-selected="true"/);
    expect(html).toMatch(/class="span-name"[^>]*>step lvl5</);
  }
  await page.goto(url);
  const tree = page.getByRole("tree");
  const row = tree.getByRole("treeitem", { name: /step lvl5/ });
  await expect(row).toHaveAttribute("aria-selected", "true");
  await expect(row).toHaveAttribute("aria-level", "6");
  await expect(tree.locator('[aria-selected="true"]')).toHaveCount(1);
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  await expect(inspector.getByText("lvl5", { exact: true })).toBeVisible();
  // The trace's row in the list is the current one.
  const current = page.getByRole("list", { name: "Traces", exact: true }).locator('a[aria-current="true"]');
  await expect(current).toHaveCount(1);
  await expect(current).toContainText("step root");
  await expectNoA11yViolations(page);
});

test("a trace opens with its root's children shown, and expanding a node fetches its own", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=deep&span_id=root`);
  const tree = page.getByRole("tree");
  const root = tree.getByRole("treeitem", { name: /step root/ });
  await expect(root).toHaveAttribute("aria-expanded", "true");
  const lvl1 = tree.getByRole("treeitem", { name: /step lvl1/ });
  await expect(lvl1).toHaveAttribute("aria-expanded", "false");
  const children = page.waitForRequest((r) => r.url().includes("parent_span_id=lvl1"));
  await lvl1.locator("button.toggle").click();
  await children;
  await expect(lvl1).toHaveAttribute("aria-expanded", "true");
  await expect(tree.getByRole("treeitem", { name: /step lvl2/ })).toBeVisible();
  await root.locator("button.toggle").click();
  await expect(root).toHaveAttribute("aria-expanded", "false");
  await expect(lvl1).toHaveCount(0);
});

// A row's name gives way last: the counts and the timing bar once left it 40 px
// ("wide…"), whatever the span was called.
test("a tree row shows its span's name in full beside its counts", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=wide&span_id=root`);
  const root = page.getByRole("tree").getByRole("treeitem", { name: /wide rollout/ });
  await expect(root).toContainText("1 failed below");
  await expect(root).toContainText("30 children");
  const name = root.locator(".node-name");
  await expect(name).toHaveText("wide rollout");
  expect(await name.evaluate((e) => e.scrollWidth - e.clientWidth)).toBe(0);
  await page.goto(`/traces?run_id=${RUN}&trace_id=deep&span_id=root`);
  await expect(page.getByRole("treeitem", { name: /step lvl1/ })).toContainText("1 child");
});

// Trace names often differ only at their end ("… step 1234"): the list gives a name
// two lines before it cuts it short.
test("a trace's long name reads to its end in the list", async ({ page, request }) => {
  const run = "e2e-ws-names";
  await createRun(request, run, "names-e2e", "long names");
  const name = "evaluate held-out shopping · step 1234";
  await sendEvents(request, run, [open("long", "root", null, name, "rollout", 1), close("long", "root", "ok", 2)]);
  await page.goto(`/traces?run_id=${run}`);
  const shown = page.getByRole("list", { name: "Traces", exact: true }).locator(".name");
  await expect(shown).toHaveText(name);
  expect(await shown.evaluate((e) => [e.scrollWidth - e.clientWidth, e.scrollHeight - e.clientHeight])).toEqual([0, 0]);
});

test("the keyboard moves, expands and selects", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=wide&span_id=root`);
  const tree = page.getByRole("tree");
  await expect(tree.getByRole("treeitem", { name: /env step 0/ })).toBeVisible();
  await tree.focus();
  await page.keyboard.press("ArrowRight"); // the root is open: to its first child
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowUp");
  // The active row is named by an element that is there: a row carries its span's
  // id while it is focused or selected.
  await expect(tree).toHaveAttribute("aria-activedescendant", "node-child0");
  await expect(tree.locator("#node-child0")).toHaveClass(/focused/);
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(/span_id=child0/);
  await expect(tree.getByRole("treeitem", { name: /env step 0/ })).toHaveAttribute("aria-selected", "true");
  await page.keyboard.press("ArrowLeft"); // to the parent
  await page.keyboard.press("ArrowLeft"); // and shut it
  await expect(tree.getByRole("treeitem", { name: /wide rollout/ })).toHaveAttribute("aria-expanded", "false");
});

test("focusing a tree with nothing selected makes its first row the active one", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=wide`);
  const tree = page.getByRole("tree");
  await expect(tree.getByRole("treeitem", { name: /wide rollout/ })).toBeVisible();
  await tree.focus();
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(/span_id=root/);
});

test("a model span's messages read as a transcript, as text", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=deep&span_id=chat`);
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  // Two messages in, the assistant's reply out.
  await expect(inspector.locator(".transcript li")).toHaveCount(3);
  // Markup a user sent is shown, not interpreted.
  await expect(inspector.getByText("<b>2+2?</b>")).toBeVisible();
  await expect(inspector.locator(".transcript b")).toHaveCount(0);
  await expectNoA11yViolations(page);
});

test("filters narrow the list", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(2);
  await page.getByText("Status: any").click();
  await page.getByRole("checkbox", { name: "failed", exact: true }).check();
  await expect(page).toHaveURL(/status=error/);
  await expect(list.getByRole("listitem")).toHaveCount(1);
  await expect(list.getByRole("listitem").first()).toContainText("wide rollout");
});

test("a search of nine terms says so", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  await page.getByLabel("Search").fill("a b c d e f g h i");
  await expect(page.getByText("9 terms: at most 8 are allowed")).toBeVisible();
  await expect(page.getByRole("button", { name: "Search" })).toBeDisabled();
});

test("a missing span is reported and nothing is selected", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=deep&span_id=nope`);
  await expect(page.getByRole("alert")).toHaveText("span nope not found in trace deep");
  await expect(page.locator('[role="treeitem"][aria-selected="true"]')).toHaveCount(0);
  // The tree names no active row that is not there.
  await expect(page.getByRole("tree")).not.toHaveAttribute("aria-activedescendant", /./);
  await expectNoA11yViolations(page);
  await page.goto(`/traces?run_id=${RUN}&trace_id=ghost&span_id=root`);
  await expect(page.getByRole("alert").first()).toContainText("trace ghost not found");
});

test("copy buttons put the ids on the clipboard", async ({ page, context }) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await page.goto(`/traces?run_id=${RUN}&trace_id=deep&span_id=lvl3`);
  await page.getByRole("button", { name: "Copy span id" }).click();
  await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe("lvl3");
  await page.getByRole("button", { name: "Copy trace id" }).click();
  await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe("deep");
  await page.getByRole("button", { name: "Copy link" }).click();
  await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toContain("span_id=lvl3");
  // A click is seen to have worked, and said to a screen reader; then the button is back.
  await expect(page.getByRole("button", { name: "Copied ✓" })).toBeVisible();
  await expect(page.getByRole("status").filter({ hasText: "Copied to the clipboard" }).first()).toBeAttached();
  await expect(page.getByRole("button", { name: "Copy link" })).toBeVisible({ timeout: 5000 });
});

test("back and forward restore the selection", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}&trace_id=deep&span_id=lvl2`);
  const tree = page.getByRole("tree");
  await tree.getByRole("treeitem", { name: /step lvl1/ }).click();
  await expect(page).toHaveURL(/span_id=lvl1/);
  await page.goBack();
  await expect(page).toHaveURL(/span_id=lvl2/);
  await expect(tree.getByRole("treeitem", { name: /step lvl2/ })).toHaveAttribute("aria-selected", "true");
  await page.goForward();
  await expect(tree.getByRole("treeitem", { name: /step lvl1/ })).toHaveAttribute("aria-selected", "true");
});

test("an open running trace refreshes in place, keeping selection and scroll", async ({ page, request }) => {
  const live = [open("live", "root", null, "live rollout", "rollout", 1)];
  for (let i = 0; i < 60; i++) live.push(open("live", `c${i}`, "root", `live step ${i}`, "env_step", 10 + i));
  await sendEvents(request, RUN, live);
  await page.goto(`/traces?run_id=${RUN}&trace_id=live&span_id=c45`);
  const tree = page.getByRole("tree");
  const row = tree.getByRole("treeitem", { name: /live step 45/ });
  await expect(row).toHaveAttribute("aria-selected", "true");
  await expect(page.locator(".tree-pane .pane-head .live")).toBeVisible();
  const scroller = page.locator(".tree-scroll");
  const top = await scroller.evaluate((el) => el.scrollTop);
  expect(top).toBeGreaterThan(0);

  // The script goes on: the selected span fails, a new step starts.
  await sendEvents(request, RUN, [
    close("live", "c45", "error", 200, { error: { type: "EnvError", message: "episode crashed" } }),
    open("live", "c60", "root", "live step 60", "env_step", 300),
  ]);
  await expect(row.locator(".dot.status-error")).toBeVisible({ timeout: 10_000 });
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  await expect(inspector.getByText("episode crashed")).toBeVisible();
  await expect(page.locator(".tree-pane .pane-head")).toContainText("62 spans");
  await expect(row).toHaveAttribute("aria-selected", "true");
  expect(await scroller.evaluate((el) => el.scrollTop)).toBe(top);

  // Once the trace ends the page stops refreshing and says so no more.
  await sendEvents(request, RUN, [close("live", "root", "ok", 400)]);
  await expect(page.locator(".tree-pane .pane-head .live")).toHaveCount(0, { timeout: 10_000 });
  await scroller.evaluate((el) => { el.scrollTop = 0; });
  await expect(tree.getByRole("treeitem", { name: /live rollout/ }).locator(".dot.status-ok")).toBeVisible();
});

test("a trace that lost spans says so in the list, the tree and the inspector", async ({ page, request }) => {
  // What the Python SDK sends when its queue filled: the root counts what it dropped.
  await sendEvents(request, RUN, [
    open("lossy", "root", null, "lossy rollout", "rollout", 5000),
    open("lossy", "kept", "root", "env step kept", "env_step", 5001),
    close("lossy", "kept", "ok", 5002),
    close("lossy", "root", "ok", 5010, { attributes: { "treeline.dropped_spans": 23 } }),
  ]);
  await page.goto(`/traces?run_id=${RUN}&q=lossy`);
  const row = page.getByRole("list", { name: "Traces", exact: true }).getByRole("link", { name: /lossy rollout/ });
  await expect(row).toContainText("23 spans lost");
  await row.click();
  await expect(page).toHaveURL(/trace_id=lossy/);
  await expect(page.locator(".tree-pane .pane-head")).toContainText("23 spans lost");
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  await expect(inspector).toContainText("23 spans lost: the SDK dropped these spans");
  // A trace that lost nothing shows no such count (its list row stays beside it).
  await page.goto(`/traces?run_id=${RUN}&trace_id=wide&span_id=root`);
  await expect(page.getByRole("tree")).toBeVisible();
  await expect(inspector.getByRole("heading", { name: "wide rollout" })).toBeVisible();
  await expect(page.locator(".tree-pane .pane-head")).not.toContainText("lost");
  await expect(inspector).not.toContainText("lost");
});

// A traceback (the Python SDK's) or a stack trace (an OpenTelemetry exception's) reads
// as its lines, not as one quoted string full of \n.
test("a failure's stack trace reads as preformatted lines", async ({ page, request }) => {
  const run = "e2e-ws-trace";
  await createRun(request, run, "workspace-e2e", "stack traces");
  const traceback = 'Traceback (most recent call last):\n  File "train.py", line 12, in step\n    reward = score(out)\nValueError: bad obs';
  await sendEvents(request, run, [
    open("tb", "root", null, "failing step", "agent", 1),
    close("tb", "root", "error", 2, { error: { type: "ValueError", message: "bad obs", traceback } }),
  ]);
  await page.goto(`/traces?run_id=${run}&trace_id=tb&span_id=root`);
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  const text = inspector.locator("pre.json-text");
  await expect(text).toHaveCount(1);
  await expect(text).toHaveText(traceback);
  // Each line on a line of its own: the block is as tall as its four lines.
  const box = (await text.boundingBox())!;
  const line = await text.evaluate((e) => parseFloat(getComputedStyle(e).fontSize));
  expect(box.height).toBeGreaterThan(3.5 * line);
  await page.screenshot({ path: "test-results/stack-trace.png" });
});
