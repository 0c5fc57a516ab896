/**
 * A new folder is a new name in its parent: a file written durably into folders that did not exist
 * is on the disk only once each new folder's parent is fsynced too. Shown with strace on the built
 * writeDurableFile and the call journal's first record.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { callsOf, indexOf, traced } from '../support/strace.js';

const built = (path: string) => JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'store', path));

/**
 * Whether a journal of a new run, its first record appended and synced (after `before`, statements
 * on its `log`), left `journal/` fsynced, so the run folder's name is on the disk: seen with strace.
 */
async function journalFolderSynced(prefix: string, before: string): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const script = join(dir, 'journal.mjs');
  writeFileSync(
    script,
    `import { FileJournals } from ${built('file-journal.js')};
const log = new FileJournals(process.argv[2]).journalLog('run-1', 'work-1');
${before}await log.append({ intent: 'k', worst: 1 });
await log.sync();
await log.close();\n`,
  );
  const trace = join(dir, 'journal.trace');
  expect(await traced(trace, process.execPath, [script, dir])).toBe(0);
  return indexOf(callsOf(trace), (call) => call.call === 'fsync' && call.path === join(dir, 'journal')) >= 0;
}

describe('new folders are durable', () => {
  it('writeDurableFile into folders that did not exist fsyncs each new folder\'s parent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'durable-folders-'));
    const script = join(dir, 'write.mjs');
    writeFileSync(script, `import { writeDurableFile } from ${built('durable-file.js')};\nwriteDurableFile(process.argv[2], 'x', { what: 'test file' });\n`);
    const target = join(dir, 'data', 'coverage', 'deep', 'file.json');
    const trace = join(dir, 'write.trace');
    expect(await traced(trace, process.execPath, [script, target])).toBe(0);
    const calls = callsOf(trace);
    for (const parent of [dir, join(dir, 'data'), join(dir, 'data', 'coverage'), join(dir, 'data', 'coverage', 'deep')]) {
      expect({ parent, synced: indexOf(calls, (call) => call.call === 'fsync' && call.path === parent) >= 0 }).toEqual({ parent, synced: true });
    }
  });

  it('the call journal\'s first record of a run makes its run folder\'s name durable in journal/', async () => {
    expect(await journalFolderSynced('durable-journal-', '')).toBe(true);
  });

  it('a work\'s claim, made before its first record, makes its run folder\'s name durable in journal/ too', async () => {
    // As every work starts (claimJournal): the claim made the run folder with a plain mkdir, so the
    // first record found it there and synced only the names inside it (found by the crash harness).
    expect(await journalFolderSynced('durable-claim-', 'await log.claim(1);\n')).toBe(true);
  });
});
