import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CallJournal } from '../../src/warehouse/call-journal.js';

describe('the call journal, on real files', () => {
  it('replays what an attempt left: settled calls at their charge, a call cut off at its worst, a cancelled one at nothing', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const first = CallJournal.load(dataDir, 'run-1', 'w1:target');
    first.intend('a', 150);
    first.settle('a', 120);
    first.intend('b', 150);
    first.intend('c', 3);
    first.cancel('c');
    first.close();
    const replayed = CallJournal.load(dataDir, 'run-1', 'w1:target');
    expect(replayed.totals()).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
    expect(replayed.isSettled('a')).toBe(true);
    expect(replayed.hasOpenIntent('b')).toBe(true);
    expect(replayed.hasOpenIntent('c')).toBe(false);
    replayed.close();
  });

  it('a later attempt that claims the journal stops the earlier one from making calls, while its answers in flight still settle', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journal-'));
    const earlier = CallJournal.load(dataDir, 'run-1', 'w1:target');
    earlier.claim(1);
    earlier.intend('a', 10);
    const later = CallJournal.load(dataDir, 'run-1', 'w1:target');
    later.claim(2);
    expect(() => earlier.intend('b', 10)).toThrow(/attempt 1 of this work was superseded/);
    earlier.settle('a', 10);
    earlier.close();
    later.intend('c', 10);
    later.close();
    expect(CallJournal.load(dataDir, 'run-1', 'w1:target').totals()).toEqual({ credits: 20, settledCalls: 1, lostCalls: 1, lostCredits: 10 });
  });
});
