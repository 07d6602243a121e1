import { test, expect, live } from "./fixtures";
import { expectNoA11yViolations } from "./a11y";

// A second server, started by scripts/e2e.sh with stored keys, so it asks for sign-in.
const BASE = process.env.AUTH_BASE_URL ?? "";
const WRITE_KEY = process.env.AUTH_WRITE_KEY ?? "";
const READ_KEY = process.env.AUTH_READ_KEY ?? "";
const RUN = "e2e-team";

test.use({ baseURL: BASE });

test.beforeAll(async ({ playwright }) => {
  expect(BASE, "scripts/e2e.sh starts the signed-in server and sets AUTH_BASE_URL").not.toBe("");
  const api = await playwright.request.newContext({
    baseURL: BASE,
    extraHTTPHeaders: { authorization: `Bearer ${WRITE_KEY}` },
  });
  const put = await api.put(`/api/runs/${RUN}`, { data: { project: "team-e2e", name: "shared run" } });
  expect(put.ok(), await put.text()).toBeTruthy();
  const events = [
    { op: "open", trace_id: "t1", span_id: "root", name: "rollout 1", kind: "rollout", ts: 1000 },
    { op: "open", trace_id: "t1", span_id: "plan", parent_span_id: "root", name: "plan step", kind: "model", ts: 1100 },
    { op: "close", trace_id: "t1", span_id: "plan", status: "ok", ts: 1200 },
    { op: "open", trace_id: "t1", span_id: "lookup", parent_span_id: "root", name: "lookup tool", kind: "tool", ts: 1300 },
    { op: "close", trace_id: "t1", span_id: "lookup", status: "ok", ts: 1400 },
    { op: "close", trace_id: "t1", span_id: "root", status: "ok", ts: 1500 },
  ];
  const sent = await api.post(`/api/runs/${RUN}/traces/events`, { data: { events } });
  expect(sent.ok(), await sent.text()).toBeTruthy();
  expect((await sent.json()).rejected).toEqual([]);
  // Reads need a key too.
  const anonymous = await playwright.request.newContext({ baseURL: BASE });
  expect((await anonymous.get(`/api/runs/${RUN}`)).status()).toBe(401);
  await api.dispose();
  await anonymous.dispose();
});

test("a signed-out deep link signs in, then opens the same span; signing out ends it", async ({ page }) => {
  const deep = `/traces?run_id=${RUN}&trace_id=t1&span_id=lookup`;
  await page.goto(deep);
  await expect(page).toHaveURL(/\/login\?next=/);
  await expect(page.getByRole("heading", { name: "Sign in" })).toBeVisible();
  await expectNoA11yViolations(page);
  await page.getByLabel("API key").fill(READ_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();

  await expect(page).toHaveURL(`${BASE}${deep}`);
  await live(page);
  const tree = page.getByRole("tree");
  await expect(tree.getByRole("treeitem", { name: /lookup tool/ })).toHaveAttribute("aria-selected", "true");
  const inspector = page.getByRole("complementary", { name: "Span inspector" });
  await expect(inspector.getByText("lookup", { exact: true })).toBeVisible();

  // Hydrated under the page's script policy: a click moves the selection and the URL.
  await tree.getByRole("treeitem", { name: /rollout 1/ }).click();
  await expect(page).toHaveURL(/span_id=root/);

  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto(deep);
  await expect(page).toHaveURL(/\/login\?next=/);
});

test("pages carry a script policy with a nonce, and the app hydrates under it", async ({ page, request }) => {
  const response = await request.get("/login");
  expect(response.headers()["content-security-policy"]).toContain("frame-ancestors 'none'");
  await page.goto("/login");
  await page.getByLabel("API key").fill(READ_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(`${BASE}/`);
  const policy = await page.evaluate(async () => (await fetch("/")).headers.get("content-security-policy"));
  expect(policy).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9_-]{16,}' 'wasm-unsafe-eval'/);
  // The runs list renders; the console-error fixture fails the test on any script
  // the policy blocked.
  await expect(page.getByRole("row", { name: /shared run/ })).toBeVisible();
  await expect(page.getByRole("button", { name: "Sign out" })).toBeVisible();
});

test("a session without an admin key is told it cannot delete a run, and the run stays", async ({ page, consoleErrors }) => {
  await page.goto(`/runs/${RUN}`);
  await page.getByLabel("API key").fill(WRITE_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(`${BASE}/runs/${RUN}`);
  await live(page);
  await page.getByText("Delete this run").click();
  await page.getByRole("textbox", { name: /Type the run's name/ }).fill("shared run");
  await page.getByRole("button", { name: "Delete run" }).click();
  await expect(page.getByRole("alert")).toHaveText("The run was not deleted: deleting a run takes an admin key");
  // The browser logs the refused request itself; that one is expected.
  expect(consoleErrors).toEqual(["Failed to load resource: the server responded with a status of 403 (Forbidden)"]);
  consoleErrors.splice(0, 1);
  await page.reload();
  await expect(page.getByRole("heading", { name: /shared run/ })).toBeVisible();
});
