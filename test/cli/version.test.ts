import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { runCli } from '../support/cli.js';

const { version } = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string };

describe('harvester --version', () => {
  it.each(['--version', '-V'])('%s prints the package version alone and exits 0', async (flag) => {
    const result = await runCli([flag]);
    expect(result).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});
