import { test as base, expect, type APIRequestContext, type Page } from "@playwright/test";

/** Fails the test on any browser console error or uncaught page error: that is
 * what a broken hydration looks like. */
export const test = base.extend<{ consoleErrors: string[]; untilLive: boolean }>({
  /** Whether `page.goto` returns only once the page answers input (see `live`). A
   * test of what happens before hydration turns it off with `test.use`. */
  untilLive: [true, { option: true }],
  page: async ({ page, untilLive }, use) => {
    if (untilLive) {
      const goto = page.goto.bind(page);
      page.goto = async (url, options) => {
        const response = await goto(url, options);
        await live(page);
        return response;
      };
      const reload = page.reload.bind(page);
      page.reload = async (options) => {
        const response = await reload(options);
        await live(page);
        return response;
      };
    }
    await use(page);
  },
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

/** Waits until the page's wasm has taken over the server-rendered page (the app then
 * marks <html data-hydrated>): a click or a key before that does nothing. A page
 * without the app, such as the sign-in form, is live at once. */
export async function live(page: Page): Promise<void> {
  await page.waitForFunction(
    () =>
      document.documentElement.hasAttribute("data-hydrated") ||
      !document.querySelector('link[href="/pkg/treeline_bg.wasm"]'),
  );
}

/** Holds the page's wasm back until the returned function is called, so that what
 * the test does first lands on the server-rendered page (use with untilLive off). */
export async function holdBundle(page: Page): Promise<() => void> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route("**/pkg/treeline_bg.wasm", async (route) => {
    await released;
    await route.continue();
  });
  return release;
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
