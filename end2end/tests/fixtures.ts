import { test as base, expect, type APIRequestContext, type Locator, type Page } from "@playwright/test";

/** Fails the test on any browser console error or uncaught page error: that is
 * what a broken hydration looks like. */
export const test = base.extend<{ consoleErrors: string[] }>({
  consoleErrors: [
    async ({ page }, use) => {
      const errors: string[] = [];
      page.on("console", (msg) => {
        if (msg.type() === "error") errors.push(msg.text());
      });
      page.on("pageerror", (err) => errors.push(err.message));
      await use(errors);
      expect(errors, "browser console errors").toEqual([]);
    },
    { auto: true },
  ],
});
export { expect };

/** Chooses `value` in `select` until the URL matches `url`: a choice made before
 * the page has hydrated changes nothing, and on a cold first run hydration can
 * take a few seconds. */
export async function chooseOnceHydrated(page: Page, select: Locator, value: string, url: RegExp): Promise<void> {
  await expect(async () => {
    await select.selectOption(value);
    await expect(page).toHaveURL(url, { timeout: 1_000 });
  }).toPass();
}

/** Creates a run through the public API, as a training script would. */
export async function createRun(
  request: APIRequestContext,
  runId: string,
  project: string,
  name: string,
): Promise<void> {
  const response = await request.put(`/api/runs/${runId}`, { data: { project, name } });
  expect(response.ok(), await response.text()).toBeTruthy();
}

export async function sendEvents(
  request: APIRequestContext,
  runId: string,
  events: object[],
): Promise<void> {
  const response = await request.post(`/api/runs/${runId}/traces/events`, { data: { events } });
  expect(response.ok(), await response.text()).toBeTruthy();
  const body = await response.json();
  expect(body.rejected).toEqual([]);
}
