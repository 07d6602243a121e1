import { defineConfig } from "@playwright/test";
import base from "./playwright.config";

// The browser benchmarks (scripts/browser-bench.sh): figures, not pass/fail tests,
// against a server that already holds the million-span trace.
export default defineConfig({
  ...base,
  testDir: "./perf",
  timeout: 180_000,
});
