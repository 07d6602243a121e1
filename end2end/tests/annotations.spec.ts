// Annotations from the inspector, with the keyboard, on the demo's PPO run (the
// keyless server of scripts/e2e.sh: every annotation there is anyone's).
import { test, expect, type Page } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

const PPO = "demo-ppo-cartpole";

async function lastTrace(page: Page): Promise<{ trace: string; root: string; child: string }> {
  const list = await (await page.request.get(`/api/runs/${PPO}/traces?limit=1`)).json();
  const t = list.traces[0];
  const spans = await (await page.request.get(`/api/runs/${PPO}/traces/${t.trace_id}/spans?parent_span_id=${t.root_span_id}&limit=1`)).json();
  return { trace: t.trace_id, root: t.root_span_id, child: spans.spans[0].span_id };
}

async function open(page: Page, trace: string, span: string) {
  await page.goto(`/traces?run_id=${PPO}&trace_id=${trace}&span_id=${span}`);
  await expect(page.locator("[data-hydrated]")).toHaveCount(1);
}

test("a person annotates a trace and a span with the keyboard, and a reload keeps them", async ({ page, consoleErrors }) => {
  const { trace, root, child } = await lastTrace(page);
  await open(page, trace, root);
  const notes = page.getByRole("region", { name: "Annotations of this trace" });
  const form = page.locator("form.note-form");
  await expect(notes).toContainText("None on this trace yet.");

  // `a` opens the form with the name focused; Escape cancels and keeps nothing.
  await page.locator("body").press("a");
  await expect(form.getByLabel("Name")).toBeFocused();
  await page.keyboard.type("label");
  await page.keyboard.press("Escape");
  await expect(form.getByLabel("Name")).toHaveCount(0);
  await expect(notes).toContainText("None on this trace yet.");

  // Enter saves: the note is listed at once, as a person's.
  await page.locator("body").press("a");
  await page.keyboard.type("label");
  await page.keyboard.press("Tab");
  await page.keyboard.type("reward hacking");
  await page.keyboard.press("Tab");
  await page.keyboard.type("copies the answer from the prompt");
  await expectNoA11yViolations(page);
  await page.keyboard.press("Enter");
  await expect(notes.locator(".note-chip")).toHaveText(["label = reward hacking"]);
  const note = notes.locator(".note").first();
  await expect(note).toContainText("anyone (this server has no keys) · person");
  await expect(note).toContainText("copies the answer from the prompt");
  await expectNoA11yViolations(page);

  // Change fills the form with a note; saved under another name, it is a new one.
  await page.getByRole("button", { name: "Change" }).click();
  await expect(form.getByLabel("Name")).toHaveValue("label");
  await form.getByLabel("Name").fill("score");
  await form.getByLabel("Value").fill("3");
  await form.getByLabel("Value").press("Enter");
  await expect(notes.locator(".note-chip")).toHaveText(["label = reward hacking", "score = 3"]);

  // A child span has its own annotations; the trace's are not among them.
  await open(page, trace, child);
  const spanNotes = page.getByRole("region", { name: "Annotations of this span" });
  await expect(spanNotes).toContainText("None on this span yet.");
  await page.getByRole("button", { name: /Annotate this span/ }).click();
  await form.getByLabel("Name").fill("score");
  await form.getByLabel("Value").fill("high");
  await form.getByLabel("Value").press("Enter");
  await expect(spanNotes.getByRole("alert")).toContainText("score is a number");
  // That refusal is the one error the browser logs (its 400): expected, so not a failure.
  const refused = consoleErrors.filter((e) => e.includes("status of 400"));
  expect(refused).toHaveLength(1);
  consoleErrors.splice(consoleErrors.indexOf(refused[0]), 1);
  await form.getByLabel("Value").fill("1.5");
  await form.getByLabel("Value").press("Enter");
  await expect(spanNotes.locator(".note-chip")).toHaveText(["score = 1.5"]);

  // The link reopens them all, and the API holds exactly these.
  await open(page, trace, root);
  await expect(notes.locator(".note")).toHaveCount(2);
  const stored = await (await page.request.get(`/api/runs/${PPO}/traces/${trace}/annotations`)).json();
  const seen = stored.annotations.map((a: { span_id: string | null; name: string; value: unknown; source: string }) =>
    [a.span_id, a.name, a.value, a.source]);
  expect(seen).toEqual([
    [null, "label", "reward hacking", "person"],
    [null, "score", 3, "person"],
    [child, "score", 1.5, "person"],
  ]);

  // Remove takes it away, here and in the store.
  await notes.locator(".note").filter({ hasText: "score = 3" }).getByRole("button", { name: "Remove" }).click();
  await expect(notes.locator(".note-chip")).toHaveText(["label = reward hacking"]);
  const left = await (await page.request.get(`/api/runs/${PPO}/traces/${trace}/annotations`)).json();
  expect(left.annotations.map((a: { name: string }) => a.name)).toEqual(["label", "score"]);

  // The trace's row in the list carries its annotations (the span's too) as chips, and
  // the filter builder offers the names: filtering by one lists just this trace.
  await page.reload();
  const row = page.locator(".trace-row").filter({ has: page.locator(".note-chip") });
  await expect(row.locator(".note-chip")).toHaveText(["label = reward hacking", "score = 1.5"]);
  await page.getByLabel("Filter field").selectOption("note.label");
  await page.getByLabel("Filter operator").selectOption("=");
  await page.getByLabel("Filter value").fill("reward hacking");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(page).toHaveURL(/filter=note\.label/);
  await expect(page.locator(".trace-row")).toHaveCount(1);
  await expect(page.locator(".trace-row .note-chip").first()).toHaveText("label = reward hacking");
});

test("review mode steps through five traces with j and k, scoring each with a digit", async ({ page }) => {
  const RUN = "demo-interrupted";
  const list = await (await page.request.get(`/api/runs/${RUN}/traces?limit=6`)).json();
  const ids: string[] = list.traces.map((t: { trace_id: string }) => t.trace_id);
  await page.goto(`/traces?run_id=${RUN}`);
  await page.getByRole("button", { name: "Review" }).click();
  await expect(page).toHaveURL(/review=score/);
  await expect(page.getByRole("note").filter({ hasText: "Reviewing" })).toContainText("a digit sets note.score");
  await expectNoA11yViolations(page);

  // j selects the first trace; each digit scores the selected one and moves on.
  await page.locator("body").press("j");
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[0]}`));
  for (const [i, digit] of ["5", "4", "3", "2", "1"].entries()) {
    await page.locator("body").press(digit);
    await expect(page).toHaveURL(new RegExp(`trace_id=${ids[i + 1]}`));
  }
  // k goes back one; the scored rows show their chips.
  await page.locator("body").press("k");
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[4]}`));
  const rows = page.locator(".trace-row");
  for (const [i, digit] of ["5", "4", "3", "2", "1"].entries()) {
    await expect(rows.nth(i).locator(".note-chip")).toHaveText([`score = ${digit}`]);
  }
  await expect(rows.nth(5).locator(".note-chip")).toHaveCount(0);
  // Stored as a person's, on the traces themselves.
  for (const [i, digit] of [5, 4, 3, 2, 1].entries()) {
    const got = await (await page.request.get(`/api/runs/${RUN}/traces/${ids[i]}/annotations`)).json();
    expect(got.annotations.map((a: { span_id: string | null; name: string; value: number; source: string }) =>
      [a.span_id, a.name, a.value, a.source])).toEqual([[null, "score", digit, "person"]]);
  }
  // The review is a link: reloading keeps the mode and the place.
  await page.reload();
  await expect(page.getByRole("note").filter({ hasText: "Reviewing" })).toBeVisible();
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[4]}.*review=score`));
});

test("in review mode a letter labels a trace with one of the run's labels and moves on", async ({ page }) => {
  // The demo's reviewed step 130 labelled the code samples; step 131 is not labelled.
  const RUN = "demo-grpo-flat";
  const at = `run_id=${RUN}&min_step=131&max_step=131`;
  const list = await (await page.request.get(`/api/runs/${RUN}/traces?${at.replace(`run_id=${RUN}&`, "")}&limit=3`)).json();
  const ids: string[] = list.traces.map((t: { trace_id: string }) => t.trace_id);
  await page.goto(`/traces?${at}&review=score`);
  await expect(page.locator("[data-hydrated]")).toHaveCount(1);
  const banner = page.getByRole("note").filter({ hasText: "Reviewing" });
  await expect(banner.getByLabel("Label annotation")).toHaveValue("label");
  // Each of the run's labels has its letter, none of them j, k or a.
  const labels = banner.locator(".review-label");
  await expect(labels).toHaveCount(3);
  const keys = await labels.locator("kbd").allTextContents();
  expect(new Set(keys).size).toBe(3);
  for (const k of keys) expect(["j", "k", "a"]).not.toContain(k);
  await expectNoA11yViolations(page);

  const wrong = (await labels.filter({ hasText: "wrong answer" }).locator("kbd").textContent()) ?? "";
  const fine = (await labels.filter({ hasText: "fine" }).locator("kbd").textContent()) ?? "";
  await page.locator("body").press("j");
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[0]}`));
  await page.locator("body").press(wrong);
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[1]}`));
  await page.locator("body").press(fine);
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[2]}`));
  const rows = page.locator(".trace-row");
  await expect(rows.nth(0).locator(".note-chip")).toHaveText(["label = wrong answer"]);
  await expect(rows.nth(1).locator(".note-chip")).toHaveText(["label = fine"]);
  for (const [i, label] of ["wrong answer", "fine"].entries()) {
    const got = await (await page.request.get(`/api/runs/${RUN}/traces/${ids[i]}/annotations`)).json();
    expect(got.annotations.map((a: { span_id: string | null; name: string; value: string; source: string }) =>
      [a.span_id, a.name, a.value, a.source])).toEqual([[null, "label", label, "person"]]);
  }
  // The review is a link: a reload keeps the mode, the place and the labels.
  await page.reload();
  await expect(page).toHaveURL(new RegExp(`trace_id=${ids[2]}.*review=score`));
  await expect(labels).toHaveCount(3);

  // A label written with the form joins the keys at once.
  await page.locator("body").press("a");
  await page.keyboard.type("label");
  await page.keyboard.press("Tab");
  await page.keyboard.type("reward hacking");
  await page.keyboard.press("Enter");
  await expect(labels).toHaveCount(4);
  await expect(labels.filter({ hasText: "reward hacking" }).locator("kbd")).toHaveText("r");
});
