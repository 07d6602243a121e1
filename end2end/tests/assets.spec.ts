import type { Page } from "@playwright/test";
import { test, expect, createRun, live } from "./fixtures";

const WASM_MAGIC = Buffer.from([0x00, 0x61, 0x73, 0x6d]);

// A browser that accepts gzip is sent the bundle's gzipped copy, about a third of
// its size; one that does not still gets the bundle itself.
test("the browser bundle is sent gzipped to a browser that accepts it", async ({ request }) => {
  const plain = await request.get("/pkg/treeline_bg.wasm", {
    headers: { "Accept-Encoding": "identity" },
  });
  expect(plain.status()).toBe(200);
  expect(plain.headers()["content-encoding"]).toBeUndefined();
  const raw = await plain.body();
  expect(raw.subarray(0, 4)).toEqual(WASM_MAGIC);

  const packed = await request.get("/pkg/treeline_bg.wasm", {
    headers: { "Accept-Encoding": "gzip" },
  });
  expect(packed.status()).toBe(200);
  expect(packed.headers()["content-encoding"]).toBe("gzip");
  expect(packed.headers()["content-type"]).toBe("application/wasm");
  // A shared cache keeps the two apart.
  expect(packed.headers()["vary"]).toContain("accept-encoding");
  const sent = Number(packed.headers()["content-length"]);
  expect(sent).toBeLessThan(raw.length / 2);
  // The client inflates it back to the same bundle.
  expect(await packed.body()).toEqual(raw);

  for (const file of ["/pkg/treeline.js", "/pkg/treeline.css"]) {
    const r = await request.get(file, { headers: { "Accept-Encoding": "gzip" } });
    expect(r.headers()["content-encoding"], file).toBe("gzip");
  }
});

// A browser that accepts brotli (every current one) gets the brotli copy, smaller
// still than gzip's, which decodes to the same bundle.
test("the browser bundle is sent with brotli to a browser that accepts it", async ({ request }) => {
  const plain = await (await request.get("/pkg/treeline_bg.wasm", {
    headers: { "Accept-Encoding": "identity" },
  })).body();
  const sizes: Record<string, number> = {};
  for (const encoding of ["gzip", "br"]) {
    const r = await request.get("/pkg/treeline_bg.wasm", {
      headers: { "Accept-Encoding": encoding === "br" ? "gzip, deflate, br" : encoding },
    });
    expect(r.headers()["content-encoding"]).toBe(encoding);
    expect(r.headers()["vary"]).toContain("accept-encoding");
    sizes[encoding] = Number(r.headers()["content-length"]);
    expect(await r.body()).toEqual(plain);
  }
  expect(sizes.br).toBeLessThan(sizes.gzip);
  for (const file of ["/pkg/treeline.js", "/pkg/treeline.css"]) {
    const r = await request.get(file, { headers: { "Accept-Encoding": "br" } });
    expect(r.headers()["content-encoding"], file).toBe("br");
  }
});

// The paths of the wasm files `page` fetches, in order, as it fetches them.
function wasmRequests(page: Page): string[] {
  const paths: string[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.endsWith(".wasm")) paths.push(path);
  });
  return paths;
}

// A chunk's name stays the same when its code changes, so no file of the bundle is
// reused from an earlier build without asking: each is revalidated, and an unchanged
// one costs a 304 and no body.
test("the bundle's files are revalidated, and an unchanged one is not sent again", async ({ request }) => {
  for (const file of ["/pkg/treeline_bg.wasm", "/pkg/treeline.js"]) {
    const first = await request.get(file, { headers: { "Accept-Encoding": "gzip" } });
    expect(first.headers()["cache-control"], file).toBe("no-cache");
    const modified = first.headers()["last-modified"];
    expect(modified, file).toBeTruthy();
    const again = await request.get(file, {
      headers: { "Accept-Encoding": "gzip", "If-Modified-Since": modified },
    });
    expect(again.status(), file).toBe(304);
    expect((await again.body()).length, file).toBe(0);
  }
});

// The release bundle is split by route: the runs page fetches only the main module,
// and a page past it fetches its own code when the reader opens it.
test("the runs page carries only its own code; a run's page loads its code when opened", async ({ page, request }) => {
  await createRun(request, "e2e-split", "split-e2e", "split-check-run");
  const wasm = wasmRequests(page);
  await page.goto("/");
  // Typing narrows the list only once the wasm has taken over the page.
  await page.getByLabel("Filter runs").fill("split-check-run");
  await expect(page.getByText(/^1 of \d+ runs$/)).toBeVisible();
  expect(wasm).toEqual(["/pkg/treeline_bg.wasm"]);

  await page.getByRole("link", { name: "split-check-run" }).click();
  await expect(page).toHaveURL(/\/runs\/e2e-split$/);
  await expect(page.getByRole("heading", { name: /split-check-run/ })).toBeVisible();
  // Opened in place: the main module is not fetched again, Run Detail's code is.
  expect(wasm.filter((p) => p === "/pkg/treeline_bg.wasm")).toHaveLength(1);
  expect(wasm.some((p) => /^\/pkg\/split___run_detail_view_\d+\.wasm$/.test(p))).toBe(true);
  expect(wasm.some((p) => /split___(traces|compare)_view/.test(p))).toBe(false);
});

// A chunk whose download fails is fetched again: opening the page still works
// (without the retry, the wasm panicked and the page stopped answering).
test("a run's page opens even when its code's first download fails", async ({ page, consoleErrors }) => {
  let failed = 0;
  await page.route(/split___run_detail_view_\d+\.wasm$/, async (route) => {
    if (failed++ === 0) await route.abort("connectionreset");
    else await route.continue();
  });
  await page.goto("/");
  await page.getByLabel("Filter runs").fill("split-check-run");
  await expect(page.getByText(/^1 of \d+ runs$/)).toBeVisible();
  await page.getByRole("link", { name: "split-check-run" }).click();
  await expect(page.getByRole("heading", { name: /split-check-run/ })).toBeVisible();
  expect(failed).toBe(2);
  // The browser reports the dropped download itself; nothing else went wrong.
  expect(consoleErrors).toEqual(["Failed to load resource: net::ERR_CONNECTION_RESET"]);
  consoleErrors.length = 0;
});

// Opens the redeploy checks' run from the runs list (the page fetches Run Detail's
// chunk then), and returns the paths of the page loads that follow the click.
async function openCheckRun(page: Page): Promise<string[]> {
  await page.goto("/");
  await page.getByLabel("Filter runs").fill("redeploy-check-run");
  await expect(page.getByText(/^1 of \d+ runs$/)).toBeVisible();
  const loads: string[] = [];
  page.on("load", () => loads.push(new URL(page.url()).pathname));
  await page.getByRole("link", { name: "redeploy-check-run" }).click();
  return loads;
}

// A page left open across a redeploy fetches the new build's chunk under the old
// name. Every bundle file names its build, and the loader, finding another build than
// its own, loads the page the reader was going to instead of running the new chunk
// beside its old main module.
test("a page from an earlier build loads the run whole rather than run a newer build's chunk", async ({ page, request }) => {
  await createRun(request, "e2e-redeploy", "split-e2e", "redeploy-check-run");
  const build = (await request.get("/pkg/treeline.js")).headers()["x-treeline-build"];
  expect(build).toMatch(/^[0-9a-f]{16}$/);
  expect((await request.get("/pkg/treeline_bg.wasm")).headers()["x-treeline-build"]).toBe(build);
  let fetched = 0;
  await page.route(/split___run_detail_view_\d+\.wasm$/, async (route) => {
    const response = await route.fetch();
    const headers = response.headers();
    // The first answer is as a new server's would be after a redeploy.
    if (fetched++ === 0) headers["x-treeline-build"] = "0123456789abcdef";
    await route.fulfill({ response, headers });
  });
  const loads = await openCheckRun(page);
  await expect.poll(() => loads).toEqual(["/runs/e2e-redeploy"]);
  // Loaded whole at the run: it hydrates with its chunk, fetched once more.
  await live(page);
  await expect(page.getByRole("heading", { name: /redeploy-check-run/ })).toBeVisible();
  expect(fetched).toBe(2);
  expect(await page.evaluate(() => sessionStorage.getItem("treeline-reloaded-for-build"))).toBe(
    "0123456789abcdef",
  );
});

// A server whose build id is stale (every answer names another build) must not make
// the page load over and over: once per build, then the loader gives up and says why.
test("a page loads whole at most once for another build", async ({ page, request, consoleErrors }) => {
  await createRun(request, "e2e-redeploy", "split-e2e", "redeploy-check-run");
  await page.route(/split___run_detail_view_\d+\.wasm$/, async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, headers: { ...response.headers(), "x-treeline-build": "fedcba9876543210" } });
  });
  const loads = await openCheckRun(page);
  await expect.poll(() => consoleErrors.join("\n")).toContain("is from build fedcba9876543210");
  expect(loads).toEqual(["/runs/e2e-redeploy"]);
  // The refused chunk leaves the page without its code: the wasm may still stop on
  // that ("unreachable") a moment later. Left first, so only what was said counts.
  await page.goto("about:blank");
  consoleErrors.length = 0;
});

// A deep link to a page past the first names its code in the page, so the browser
// fetches it beside the main module, and the page hydrates with it.
test("a deep link to the workspace preloads its code and hydrates", async ({ page, request }) => {
  const html = await (await request.get("/traces")).text();
  const preloaded = html.match(/<link[^>]*href="(\/pkg\/split___traces_view_\d+\.wasm)"[^>]*rel="preload"/);
  expect(preloaded, "the page names the workspace's chunk").not.toBeNull();
  const wasm = wasmRequests(page);
  await page.goto("/traces");
  // The search box checks its terms only once the wasm has taken over the page.
  await page.getByLabel("Search").fill("a b c d e f g h i");
  await expect(page.getByText("9 terms: at most 8 are allowed")).toBeVisible();
  // The chunk the server named is the one the page runs (both builds agree on it).
  expect(wasm).toContain(preloaded![1]);
  expect(wasm.filter((p) => /split___traces_view/.test(p))).toHaveLength(1);
  expect(wasm.some((p) => /split___(run_detail|compare)_view/.test(p))).toBe(false);
});
