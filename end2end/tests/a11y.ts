import AxeBuilder from "@axe-core/playwright";
import { expect, type Page } from "@playwright/test";

/** How many of a rule's offending elements the failure message names. */
const TARGETS_SHOWN = 5;

/** Runs axe-core over the page as it is now and fails, naming every broken rule,
 * its help text and the first few elements that break it, unless there are none. */
export async function expectNoA11yViolations(page: Page): Promise<void> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  const report = violations.map((v) => {
    const targets = v.nodes.slice(0, TARGETS_SHOWN).map((n) => `    ${n.target.join(" ")}`);
    const more = v.nodes.length > TARGETS_SHOWN ? [`    …and ${v.nodes.length - TARGETS_SHOWN} more`] : [];
    const count = v.nodes.length === 1 ? "1 element" : `${v.nodes.length} elements`;
    return [`${v.id} (${v.impact ?? "no impact given"}, ${count}): ${v.help}`, ...targets, ...more].join("\n");
  });
  expect(violations.length, `axe-core found accessibility violations on ${page.url()}:\n\n${report.join("\n\n")}\n`).toBe(0);
}
