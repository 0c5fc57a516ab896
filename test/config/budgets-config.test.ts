import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { parseHarvestConfig } from '../../src/config/harvest-config.js';

const FILE = 'budgets-under-test.yaml';
const HARVESTS = [
  'harvests:',
  '  - name: daily-tiktok',
  '    budget: { credits: 1000 }',
  '    channels: [{ platform: tiktok, handle: happy_otter0, content: videos, max_items: 10 }]',
  '  - name: weekly-comments',
  '    budget: { credits: 1000 }',
  '    channels: [{ platform: tiktok, handle: happy_otter1, content: videos, max_items: 10 }]',
  '  - name: other',
  '    budget: { credits: 1000 }',
  '    channels: [{ platform: tiktok, handle: happy_otter2, content: videos, max_items: 10 }]',
];
const text = (...budgets: string[]) => `${[...HARVESTS, 'budgets:', ...budgets].join('\n')}\n`;

function problem(yaml: string): ConfigError {
  try {
    parseHarvestConfig(yaml, FILE, {});
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('the budgets section of the harvest config', () => {
  it('gives each harvest the budgets that cover it: those that name it, and those of every harvest', () => {
    const config = parseHarvestConfig(
      text('  - { name: research, credits: 500000, per: month, harvests: [daily-tiktok, weekly-comments], timezone: Europe/Paris }', '  - { name: the-key, credits: 900000, per: month, harvests: all }'),
      FILE,
      {},
    );
    expect(config.budgets).toEqual([
      { name: 'research', credits: 500_000, per: 'month', harvests: ['daily-tiktok', 'weekly-comments'], timezone: 'Europe/Paris' },
      { name: 'the-key', credits: 900_000, per: 'month', harvests: 'all', timezone: 'UTC' },
    ]);
    const covering = Object.fromEntries(config.harvests.map((harvest) => [harvest.name, (harvest.budgets ?? []).map((budget) => budget.name)]));
    expect(covering).toEqual({ 'daily-tiktok': ['research', 'the-key'], 'weekly-comments': ['research', 'the-key'], other: ['the-key'] });
  });

  it('has no budgets when the section is absent', () => {
    const config = parseHarvestConfig(`${HARVESTS.join('\n')}\n`, FILE, {});
    expect(config.budgets).toBeUndefined();
    expect(config.harvests.every((harvest) => harvest.budgets === undefined)).toBe(true);
  });

  it.each([
    ['a harvest the file does not have', '  - { name: research, credits: 5, per: month, harvests: [daily-tiktok, dialy-comments] }', 'budgets[0].harvests[1]', 'no harvest named "dialy-comments"'],
    ['credits that are not a whole number', '  - { name: research, credits: 2.5, per: month, harvests: all }', 'budgets[0].credits', 'expected a whole number ≥ 1'],
    ['a period other than a month', '  - { name: research, credits: 5, per: week, harvests: all }', 'budgets[0].per', 'expected per: month'],
    ['a time zone that is not one', '  - { name: research, credits: 5, per: month, harvests: all, timezone: Mars/Olympus }', 'budgets[0].timezone', 'expected an IANA time zone'],
    ['no harvests', '  - { name: research, credits: 5, per: month }', 'budgets[0].harvests', 'expected a list of harvest names, or all'],
    ['a name twice', '  - { name: research, credits: 5, per: month, harvests: all }\n  - { name: research, credits: 6, per: month, harvests: all }', 'budgets[1].name', 'budget names must be unique'],
    ['an unknown key', '  - { name: research, credit: 5, per: month, harvests: all }', 'budgets[0].credit', 'unknown key "credit", did you mean credits?'],
  ])('refuses %s, naming the file, the field and the value', (_what, budget, field, hint) => {
    const error = problem(text(budget));
    expect(error.file).toBe(FILE);
    expect(error.message).toContain(`${field}: `);
    expect(error.message).toContain(hint);
    expect(error.line).toBeGreaterThan(HARVESTS.length);
  });
});
