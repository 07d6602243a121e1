import { test, expect, createRun, sendEvents, live } from "./fixtures";

const RUN = "e2e-body-words";

// Six rollouts whose model answers differ; two refuse, one hits a Python error.
const rollout = (i: number, answer: string, error?: object) => {
  const trace = `t${i}`;
  const close: Record<string, unknown> = { op: "close", trace_id: trace, span_id: "llm", status: error ? "error" : "ok", ts: 1003 + i * 10 };
  if (error) close.error = error;
  else close.output = { role: "assistant", content: answer };
  return [
    { op: "open", trace_id: trace, span_id: "root", name: `rollout ${i}`, kind: "rollout", ts: 1000 + i * 10, step: i },
    { op: "open", trace_id: trace, span_id: "llm", parent_span_id: "root", name: "policy", kind: "model", ts: 1001 + i * 10,
      input: { messages: [{ role: "user", content: `Task ${i}: sort the list` }] } },
    close,
    { op: "close", trace_id: trace, span_id: "root", status: "ok", ts: 1005 + i * 10 },
  ];
};

test.beforeAll(async ({ request }) => {
  // No "search" in these names: other specs find the search box by its label, and
  // the run and project pickers list every run of the shared server.
  await createRun(request, RUN, "body-words-e2e", "worded run");
  await sendEvents(request, RUN, [
    ...rollout(0, "Here is the sorted list: 1, 2, 3."),
    ...rollout(1, "Sorry, I cannot help with that request."),
    ...rollout(2, "Done. The list is sorted."),
    ...rollout(3, "I can try, but I cannot promise the order."),
    ...rollout(4, "", { type: "KeyError", message: "Traceback (most recent call last): KeyError 'x'" }),
    ...rollout(5, "I cannot sort an empty list."),
  ]);
});

test("a phrase typed in the body search lists the traces that say it, with the words marked there and in the inspector", async ({ page }) => {
  await page.goto(`/traces?run_id=${RUN}`);
  await live(page);
  const list = page.getByRole("list", { name: "Traces", exact: true });
  await expect(list.getByRole("listitem")).toHaveCount(6);

  await page.getByLabel("In bodies").fill('"I CANNOT"');
  await page.getByLabel("In bodies").press("Enter");
  await expect(page).toHaveURL(/text=%22I(\+|%20)CANNOT%22/);
  await expect(list.getByRole("listitem")).toHaveCount(3);
  await expect(page.getByText("3 traces match")).toBeVisible();
  const refusal = list.getByRole("listitem").filter({ hasText: "rollout 1" });
  await expect(refusal.locator(".line-text")).toHaveText("output: Sorry, I cannot help with that request.");
  await expect(refusal.locator(".line-text mark")).toHaveText("I cannot");
  await page.screenshot({ path: "test-results/text-search-list.png" });

  // The row opens the span that matched, with the words marked in its output.
  await refusal.getByRole("link").click();
  await expect(page).toHaveURL(/span_id=llm/);
  await expect(page.locator(".span-name")).toHaveText("policy");
  const output = page.locator("section.body").filter({ hasText: "Output" });
  await expect(output.locator("mark")).toHaveText("I cannot");
  await page.screenshot({ path: "test-results/text-search-inspector.png" });

  // An error body is searched too, and a reload keeps the search.
  await page.getByLabel("In bodies").fill("traceback");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(1);
  await expect(list.locator(".line-text")).toContainText("error:");
  await page.reload();
  await expect(page.getByLabel("In bodies")).toHaveValue("traceback");
  await expect(list.getByRole("listitem")).toHaveCount(1);

  // The name search, too, is in its box when the page is opened from a link.
  await page.goto(`/traces?run_id=${RUN}&q=rollout&text=sorted`);
  await live(page);
  await expect(page.getByRole("searchbox", { name: "Search", exact: true })).toHaveValue("rollout");
  await expect(page.getByLabel("In bodies")).toHaveValue("sorted");
  await expect(list.getByRole("listitem")).toHaveCount(2);

  // A search with no word in it is named, in the API's words.
  await page.getByLabel("In bodies").fill("!!!");
  await page.getByLabel("In bodies").press("Enter");
  await expect(page.getByRole("alert")).toContainText("text has no word to search for");
});
