#!/usr/bin/env node
/**
 * Prints the test files that hold a test of the long tier (tagged 'long', vitest.config.ts), one
 * per line, for `npm run test:long`: vitest filters tags file by file after importing each, so
 * naming only those files keeps the long tier from importing the suite's others.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT_ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

const files = readdirSync(join(PROJECT_ROOT, 'test'), { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.test.ts'))
  .map((file) => join('test', file))
  .filter((file) => /tags: [^\n]*'long'/.test(readFileSync(join(PROJECT_ROOT, file), 'utf8')))
  .sort();
process.stdout.write(files.join('\n') + '\n');
