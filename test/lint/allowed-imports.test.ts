/**
 * The rooms' allow-lists (eslint.config.js, ROOMS) hold: in every room, an import its list does not
 * name fails the lint, and the arrows the docs' table draws pass. Runs the project's own ESLint
 * config through ESLint's Node API on probe sources that exist only in memory, at paths inside
 * the rooms (without type information, which the allow-lists do not need).
 */
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';

const eslint = new ESLint({
  cwd: PROJECT_ROOT,
  overrideConfig: {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: false } },
    rules: { '@typescript-eslint/no-floating-promises': 'off', '@typescript-eslint/no-unused-vars': 'off' },
  },
});

async function roomErrors(file: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${source}\nexport const probe = 1;\n`, { filePath: `${PROJECT_ROOT}/${file}` });
  return (result?.messages ?? []).filter((message) => message.ruleId === 'rooms/allowed-imports').map((message) => message.message);
}

/** In every room (and in a subfolder where a room has them), an import its allow-list does not name. */
const BREAKING: Array<[file: string, source: string]> = [
  ['src/api-catalog/probe.ts', "import '../harvest/rules.js';"],
  ['src/text/probe.ts', "import '../logger.js';"],
  ['src/metrics/probe.ts', "import '../store/store.js';"],
  ['src/logger.ts', "import '../workflows/definitions.js';"],
  ['src/project-paths.ts', "import './config/prices.js';"],
  ['src/harvest/probe.ts', "import '../store/layout.js';"],
  ['src/api/probe.ts', "import '../config/prices.js';"],
  ['src/config/probe.ts', "import '../store/layout.js';"],
  ['src/store/probe.ts', "import '../warehouse/lake.js';"],
  ['src/store/shared/probe.ts', "import '../../api/client.js';"],
  ['src/warehouse/probe.ts', "import '../config/prices.js';"],
  ['src/report/probe.ts', "import '../api/client.js';"],
  ['src/emulator/probe.ts', "import '../config/harvest-config.js';"],
  ['src/emulator/world/probe.ts', "import '../../harvest/rules.js';"],
  ['activities/probe.ts', "import '../workflows/definitions.js';"],
  ['workflows/probe.ts', "import type { ApiIdentity } from '../src/api/identity.js';"],
  ['workflows/probe.ts', "import { LocalStore } from '../src/store/store.js';"],
  ['workflows/probe.ts', "import { createActivities } from '../activities/index.js';"],
  ['src/temporal/probe.ts', "import '../cli/main.js';"],
  ['src/webhooks/probe.ts', "import { harvestWorkflow } from '../../workflows/harvest.js';"],
  ['src/webhooks/probe.ts', "export * from '../warehouse/lake.js';"],
  ['src/cli/commands/probe.ts', "const test = await import('../../../test/support/cli.js');"],
];

/** Arrows the table draws, including the type-only ones. */
const ALLOWED: Array<[file: string, source: string]> = [
  ['src/harvest/probe.ts', "import { PAGE_LIMITS } from '../api-catalog/endpoints.js';"],
  ['src/api/probe.ts', "import type { Logger } from '../logger.js';"],
  ['src/store/shared/probe.ts', "import { landingKey } from '../landing.js';"],
  ['src/emulator/world/probe.ts', "import { loadPriceTable } from '../../config/prices.js';"],
  ['workflows/probe.ts', "import type { HarvestActivities } from '../activities/index.js';"],
  ['workflows/probe.ts', "import { type StoreIdentity } from '../src/store/store-identity.js';"],
  ['src/webhooks/probe.ts', "import { jobCompletedSignal } from '../../workflows/definitions.js';"],
  ['src/cli/commands/probe.ts', "import { harvestWorkflow } from '../../../workflows/harvest.js';"],
];

describe('the rooms\' allow-lists', () => {
  it.each(BREAKING)('%s: %s fails the lint', async (file, source) => {
    expect(await roomErrors(file, source)).toEqual([expect.stringMatching(/ may import .*; not /)]);
  });

  it.each(ALLOWED)('%s: %s passes', async (file, source) => {
    expect(await roomErrors(file, source)).toEqual([]);
  });

  it('a file under src/ in no room fails the lint', async () => {
    expect(await roomErrors('src/unhoused.ts', '')).toEqual([expect.stringContaining('is in no room')]);
  });
});
