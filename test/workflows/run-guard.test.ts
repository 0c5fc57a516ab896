/**
 * The refusal of a run started for another store, as a pure unit: what it names, and that it is
 * not retried (its end to end behaviour is in run-routing.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { wrongStoreFailure } from '../../activities/run-guard.js';

const where = { runId: 'run-x-1', taskQueue: 'harvester' };

describe('a worker of another store refuses the task', () => {
  it('naming both locations, not retried', () => {
    const failure = wrongStoreFailure({ id: 'b', location: 'the data directory /srv/p' }, { id: 'a', location: 'the data directory /srv/q' }, where);
    expect(failure.type).toBe('WrongStore');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(
      /^a worker that keeps its data elsewhere took the run's task: the run run-x-1 was started for the data directory \/srv\/q, and a worker on task queue "harvester" keeps its data in the data directory \/srv\/p, so it refused the task, /,
    );
    expect(failure.message).not.toContain('store id');
  });

  it('with the ids, and the likely cause, when both locations read the same (one path on two machines)', () => {
    const failure = wrongStoreFailure({ id: 'id-of-workers', location: 'the data directory /srv/data' }, { id: 'id-of-laptop', location: 'the data directory /srv/data' }, where);
    expect(failure.message).toContain('was started for the data directory /srv/data (store id id-of-laptop), and a worker on task queue "harvester" keeps its data in the data directory /srv/data (store id id-of-workers)');
    expect(failure.message).toContain('two directories at one path, on two machines');
  });
});
