import { defineConfig } from "@playwright/test";
import base from "./playwright.config";

// The installed wheel (scripts/test-wheel.sh): a server started from a fresh virtual
// environment, whose address and files the script passes in.
export default defineConfig({
  ...base,
  testDir: "./install",
});
