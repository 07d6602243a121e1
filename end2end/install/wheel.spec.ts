import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test, expect } from "../tests/fixtures";

// scripts/test-wheel.sh passes: the link to the trace the SDK sent, its span's name,
// and the directory beside the installed binary where a site would be looked for.
const TRACE_URL = process.env.TRACE_URL ?? "";
const SPAN_NAME = process.env.SPAN_NAME ?? "";
const BESIDE = process.env.SITE_BESIDE ?? "";

test("the installed binary serves the dashboard alone, and a bundle written beside it changes nothing", async ({ page, request }) => {
  expect(TRACE_URL && SPAN_NAME && BESIDE, "set by scripts/test-wheel.sh").toBeTruthy();
  // Hydrated (the fixture's goto waits for it and fails on a console error).
  await page.goto("/");
  await expect(page.getByRole("link", { name: "Traces", exact: true })).toBeVisible();
  await page.goto(TRACE_URL);
  await expect(page.getByRole("tree").getByRole("treeitem", { name: new RegExp(SPAN_NAME) })).toBeVisible();
  const build = (await request.get("/pkg/treeline.js")).headers()["x-treeline-build"];
  expect(build).toBeTruthy();

  // A redeploy beside the running server: another build's files, and a broken wasm.
  mkdirSync(join(BESIDE, "pkg"), { recursive: true });
  writeFileSync(join(BESIDE, "pkg", "treeline.build"), "another-build\n");
  writeFileSync(join(BESIDE, "pkg", "treeline_bg.wasm"), "not wasm");
  await page.goto(TRACE_URL);
  await expect(page.getByRole("tree").getByRole("treeitem", { name: new RegExp(SPAN_NAME) })).toBeVisible();
  expect((await request.get("/pkg/treeline.js")).headers()["x-treeline-build"]).toBe(build);
});
