/**
 * The Prometheus alert rules in ops/prometheus/ are valid (`promtool check rules`) and fire as
 * meant on the series a worker serves (`promtool test rules` with ops/prometheus/alerts.test.yml:
 * a failed run fires HarvestRunFailed and not HarvestBudgetExhausted nor HarvestWorkflowFailed, a
 * run that could not start fires HarvestWorkflowFailed, low credits, a worker gone and a budget
 * across runs forecast to run out fire theirs). promtool is Prometheus's own, built from its Go
 * module by `npm run setup -- --for-tests`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT, TOOLS_DIR } from '../../src/project-paths.js';

const PROMTOOL = join(TOOLS_DIR, 'bin', 'promtool');
const RULES = join(PROJECT_ROOT, 'ops', 'prometheus');

function promtool(args: string[]): { code: number | null; output: string } {
  const result = spawnSync(PROMTOOL, args, { cwd: RULES, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('the alert rules', () => {
  it('promtool is installed', () => {
    expect(existsSync(PROMTOOL), `no ${PROMTOOL}: run \`npm run setup -- --for-tests\``).toBe(true);
  });

  it('pass `promtool check rules`', () => {
    const checked = promtool(['check', 'rules', 'alerts.yml']);
    expect(checked.output).toMatch(/SUCCESS: 10 rules found/);
    expect(checked.code, checked.output).toBe(0);
  });

  it('fire as meant in `promtool test rules`: a failed run, low credits, a worker gone', () => {
    const tested = promtool(['test', 'rules', 'alerts.test.yml']);
    expect(tested.code, tested.output).toBe(0);
    expect(tested.output).toContain('SUCCESS');
  });
});
