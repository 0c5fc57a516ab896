import { appendFileSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CallJournal } from '../../src/store/call-journal.js';
import { FileJournals } from '../../src/store/file-journal.js';
import { journalFile } from '../../src/store/layout.js';
import { built, runWithFileSizeLimit } from '../support/limited-child.js';

/** The journal of work `w1:target` of run `run-1` in a data directory. */
const load = (dataDir: string) => CallJournal.load(new FileJournals(dataDir), 'run-1', 'w1:target');

describe('the call journal, on real files', () => {
  it('replays what an attempt left: settled calls at their charge, a call cut off at its worst, a cancelled one at nothing', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const first = await load(dataDir);
    await first.intend('a', 150);
    await first.settle('a', 120);
    await first.intend('b', 150);
    await first.intend('c', 3);
    await first.cancel('c');
    await first.close();
    const replayed = await load(dataDir);
    expect(replayed.totals()).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
    expect(replayed.isSettled('a')).toBe(true);
    expect(replayed.hasOpenIntent('b')).toBe(true);
    expect(replayed.hasOpenIntent('c')).toBe(false);
    await replayed.close();
  });

  it('a call settled twice, by a later attempt that found its landing and by the earlier attempt running again, counts once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const earlier = await load(dataDir);
    await earlier.intend('a', 3);
    const later = await load(dataDir);
    // The later attempt finds 'a' landed, its intent open: settled at the landing's charge.
    await later.settle('a', 3);
    // The earlier attempt, thawed, settles its answer too.
    await earlier.settle('a', 3);
    await earlier.close();
    await later.close();
    const replayed = await load(dataDir);
    expect(replayed.totals()).toEqual({ credits: 3, settledCalls: 1, lostCalls: 0, lostCredits: 0 });
    await replayed.close();
  });

  it('a later attempt that claims the journal stops the earlier one from making calls, while its answers in flight still settle', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const earlier = await load(dataDir);
    await earlier.claim(1);
    await earlier.intend('a', 10);
    await earlier.intend('b', 10);
    const later = await load(dataDir);
    await later.claim(2);
    // Refused at the fence, right before its call would go on the wire (issue 39): its intent is cancelled.
    await expect(earlier.fence()).rejects.toThrow(/attempt 1 of work .* was superseded by attempt 2/);
    await earlier.cancel('b');
    // No new intent, and it cannot take the journal back.
    await expect(earlier.intend('c', 10)).rejects.toThrow(/attempt 1 of work .* lost its claim \(to attempt 2\)/);
    await expect((await load(dataDir)).claim(1)).rejects.toThrow(/superseded by attempt 2: it claims nothing/);
    // Its answer in flight settles, in the run's late records: the later attempt may have read the
    // journal for the run's figures already (the load that archives the run adds them, journal-archive.ts).
    await earlier.settle('a', 10);
    await earlier.close();
    await later.intend('d', 10);
    await later.close();
    expect((await load(dataDir)).totals()).toEqual({ credits: 30, settledCalls: 0, lostCalls: 3, lostCredits: 30 });
    const [late] = await new FileJournals(dataDir).lateLogs();
    expect(late?.runId).toBe('run-1');
    const lateRecords = await late!.logs[0]!.records();
    expect(lateRecords).toEqual([{ cancelled: 'b' }, { settled: 'a', credits: 10 }]);
    // The journal and its late records, read as one (as the lake's archive has them): exact.
    const together = mkdtempSync(join(tmpdir(), 'journal-'));
    const log = new FileJournals(together).journalLog('run-1', 'w1:target');
    for (const record of [...(await new FileJournals(dataDir).journalLog('run-1', 'w1:target').records()), ...lateRecords]) await log.append(record);
    await log.close();
    expect((await load(together)).totals()).toEqual({ credits: 20, settledCalls: 1, lostCalls: 1, lostCredits: 10 });
  });
});

describe('the call journal, record by record', () => {
  const file = (dataDir: string) => journalFile(dataDir, 'run-1', 'w1:target');

  it('writes each record with its checksum, and reads a journal back exactly', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const journal = await load(dataDir);
    await journal.sync();
    await journal.intend('a', 150);
    await journal.settle('a', 120);
    await journal.sync();
    await journal.close();
    const lines = readFileSync(file(dataDir), 'utf8').split('\n');
    expect(lines).toEqual([expect.stringMatching(/^\{"intent":"a","worst":150\}\t[0-9a-f]{8}$/), expect.stringMatching(/^\{"settled":"a","credits":120\}\t[0-9a-f]{8}$/), '']);
  });

  it('skips a last record cut short: a settlement cut leaves its intent open at its worst case', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const journal = await load(dataDir);
    await journal.intend('a', 150);
    await journal.settle('a', 120);
    await journal.intend('b', 150);
    await journal.settle('b', 90);
    await journal.close();
    for (const cut of [1, 3, 9, 20]) {
      const copy = mkdtempSync(join(tmpdir(), 'journal-'));
      const text = readFileSync(file(dataDir));
      mkdirSync(dirname(file(copy)), { recursive: true });
      writeFileSync(file(copy), text.subarray(0, text.length - cut));
      const replayed = await load(copy);
      // Cutting only the newline leaves a whole record.
      if (cut === 1) expect(replayed.totals()).toEqual({ credits: 210, settledCalls: 2, lostCalls: 0, lostCredits: 0 });
      else expect(replayed.totals()).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
      expect(replayed.hasOpenIntent('b')).toBe(cut !== 1);
    }
  });

  it('skips a record whose checksum does not match, even when it is JSON', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const journal = await load(dataDir);
    await journal.intend('a', 150);
    await journal.settle('a', 120);
    await journal.close();
    const text = readFileSync(file(dataDir), 'utf8');
    writeFileSync(file(dataDir), text.replace('"credits":120', '"credits":  1'));
    expect((await load(dataDir)).totals()).toEqual({ credits: 150, settledCalls: 0, lostCalls: 1, lostCredits: 150 });
    writeFileSync(file(dataDir), text.replace(/\t([0-9a-f]{8})\n$/, (_all, crc: string) => `\t${crc.startsWith('0') ? '1' : '0'}${crc.slice(1)}\n`));
    expect((await load(dataDir)).totals()).toEqual({ credits: 150, settledCalls: 0, lostCalls: 1, lostCredits: 150 });
  });

  it('still loads journals of earlier versions (plain JSON lines), and appends to them', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    mkdirSync(dirname(file(dataDir)), { recursive: true });
    writeFileSync(
      file(dataDir),
      ['{"intent":"a","worst":150}', '{"settled":"a","credits":120}', '{"intent":"b","worst":150}', '{"intent":"c","worst":3}', '{"cancelled":"c"}', '123', 'null', '{"intent":"d","wor'].join('\n'),
    );
    const journal = await load(dataDir);
    expect(journal.totals()).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
    // The file ends in a cut line: the new record starts on a line of its own.
    await journal.settle('b', 100);
    await journal.close();
    expect((await load(dataDir)).totals()).toEqual({ credits: 220, settledCalls: 2, lostCalls: 0, lostCredits: 0 });
  });

  it('finds a whole record glued after a cut one', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const journal = await load(dataDir);
    await journal.intend('a', 150);
    await journal.settle('a', 120);
    await journal.close();
    const [intent, settled] = readFileSync(file(dataDir), 'utf8').split('\n');
    writeFileSync(file(dataDir), `${intent}\n{"intent":"x","wor${settled}\n`);
    expect((await load(dataDir)).totals()).toEqual({ credits: 120, settledCalls: 1, lostCalls: 0, lostCredits: 0 });
  });

  it('throws when a record cannot be written whole (short write, then EFBIG), and the journal stays readable, with no record glued to the cut one', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const result = runWithFileSizeLimit<{ intended: boolean; message?: string; code?: string; totals: unknown }>(
      2,
      `import { CallJournal } from ${built('src/store/call-journal')};
import { FileJournals } from ${built('src/store/file-journal')};
const journal = await CallJournal.load(new FileJournals(${JSON.stringify(dataDir)}), 'run-1', 'w1:target');
await journal.intend('a', 150);
await journal.settle('a', 120);
await journal.intend('b', 150);
let intended = false, message, code;
try {
  await journal.intend('c'.repeat(3000), 999);
  intended = true;
} catch (error) {
  message = error.message;
  code = error.code;
}
console.log(JSON.stringify({ intended, message, code, totals: journal.totals() }));`,
    );
    expect(result.intended).toBe(false);
    expect(result.message).toBe(`cannot write call journal ${file(dataDir)}: EFBIG: file too large, write`);
    expect(result.code).toBe('EFBIG');
    // The record that failed was not counted, in the writer or by a reader.
    expect(result.totals).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
    expect(readFileSync(file(dataDir)).length).toBe(2048);
    expect((await load(dataDir)).totals()).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
    // The next attempt's records start on a line of their own.
    const next = await load(dataDir);
    await next.settle('b', 100);
    await next.intend('d', 10);
    await next.close();
    expect((await load(dataDir)).totals()).toEqual({ credits: 230, settledCalls: 2, lostCalls: 1, lostCredits: 10 });
  });

  it('starts the record after a failed append on a line of its own', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const journal = await load(dataDir);
    await journal.intend('a', 150);
    // The journal's descriptor swapped for one that cannot write: the append fails.
    const writable = (journal as unknown as { log: { fd: number } }).log.fd;
    (journal as unknown as { log: { fd: number } }).log.fd = openSync(file(dataDir), 'r');
    await expect(journal.settle('a', 120)).rejects.toThrow(new RegExp(`^cannot write call journal ${file(dataDir)}: EBADF`));
    closeSync((journal as unknown as { log: { fd: number } }).log.fd);
    (journal as unknown as { log: { fd: number } }).log.fd = writable;
    appendFileSync(file(dataDir), '{"settled":"a","cre');
    await journal.settle('a', 120);
    await journal.close();
    expect((await load(dataDir)).totals()).toEqual({ credits: 120, settledCalls: 1, lostCalls: 0, lostCredits: 0 });
  });
});
