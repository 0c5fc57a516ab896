import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { WarmLoader, type LoadProcessEnd } from '../../src/warehouse/warm-loader.js';
import { LocalStore } from '../../src/store/store.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

async function itemCount(dataDir: string): Promise<number> {
  const result = await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM items');
  return Number(result.rows[0]!.n);
}

/** The load processes this process has started and that are still running (not zombies). */
function loadProcesses(): number[] {
  const children = readdirSync('/proc/self/task').flatMap((task) => readFileSync(`/proc/self/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  return children.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('load-process.js') && !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return false; // ended meanwhile
    }
  });
}

/** The first load process of this process, once it shows as one (within 10 s). */
async function firstLoadProcess(): Promise<number | undefined> {
  for (let waited = 0; waited < 10_000; waited += 50) {
    const [pid] = loadProcesses();
    if (pid !== undefined) return pid;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return undefined;
}

describe('the warm load process', () => {
  it('loads what is pending, load after load, in one process; once it has loaded and stays idle, a fresh one replaces it, ready for the next load', async () => {
    const loader = new WarmLoader(300);
    const { dataDir, expected } = await landedSample(emulator, 'run-warm-1');
    loader.prewarm();
    // Polled: a process just forked shows the parent's command line until it has exec'd Node again.
    const prewarmed = await firstLoadProcess();
    expect(prewarmed).toBeDefined();
    // A fresh process idle for longer than the renewal time is kept: it holds nothing of a load.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(loadProcesses()).toEqual([prewarmed]);
    const first = await loader.load(dataDir);
    expect(first.landingsLoaded).toBe(expected.landings);
    // Nothing new: nothing loaded twice, in the same process. (Asked at once: the process is
    // renewed 300 ms after a load, and a query of the warehouse in between may take that long.)
    expect((await loader.load(dataDir)).landingsLoaded).toBe(0);
    expect(loadProcesses()).toEqual([prewarmed]);
    expect(await itemCount(dataDir)).toBe(expected.itemIds.size);
    // Idle after loading: the process is replaced by another, already running before the next load.
    for (let waited = 0; waited < 10_000 && (loadProcesses().length !== 1 || loadProcesses()[0] === prewarmed); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    const renewed = loadProcesses();
    expect(renewed).toHaveLength(1);
    expect(renewed[0]).not.toBe(prewarmed);
    const again = await landedSample(emulator, 'run-warm-2', dataDir);
    expect((await loader.load(dataDir)).landingsLoaded).toBe(again.expected.landings);
    expect(loadProcesses()).toEqual(renewed);
    loader.close();
  });

  it('lets the daily maintenance it runs after a run\'s final load end before it is replaced, however soon renewal is due', async () => {
    // Renewed 50 ms after a load: before, the process was replaced under a maintenance that took
    // longer (a year of tables to compact on a busy machine), which then never ended, day after day.
    const loader = new WarmLoader(50);
    const runId = 'run-warm-maintained';
    const { dataDir } = await landedSample(emulator, runId);
    const store = new LocalStore(dataDir);
    // Maintained two days ago: due after the run's final load.
    const backdated = Date.now() - 2 * 24 * 3_600_000;
    await store.markLakeMaintained(backdated);
    try {
      await loader.load(dataDir, undefined, runId);
      // The maintenance runs after the load's answer; it moves the mark when it ends.
      for (let waited = 0; waited < 60_000 && (await store.lakeMaintainedAt())! <= backdated; waited += 100) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await store.lakeMaintainedAt()).toBeGreaterThan(backdated);
    } finally {
      loader.close();
      await store.close();
    }
  }, 90_000);

  it('reports a load process that dies during the daily maintenance (no load waits on it): its signal and what it was doing', async () => {
    // Before, such a death was silent: the maintenance after a run's answer has nobody waiting on
    // it, and the process's stderr was kept only for a load's error (a year of daily runs stopped
    // twice so, with nothing logged).
    const ended: LoadProcessEnd[] = [];
    const loader = new WarmLoader(60_000, { ended: (end) => ended.push(end), maintenanceFailed: () => undefined });
    const runId = 'run-warm-killed';
    const { dataDir } = await landedSample(emulator, runId);
    const store = new LocalStore(dataDir);
    const backdated = Date.now() - 2 * 24 * 3_600_000;
    await store.markLakeMaintained(backdated);
    try {
      loader.prewarm();
      const pid = await firstLoadProcess();
      expect(pid).toBeDefined();
      await loader.load(dataDir, undefined, runId);
      // The maintenance starts with the load's answer, and opens the lake, repairs, cleans, compacts: killed within it.
      process.kill(pid!, 'SIGKILL');
      for (let waited = 0; waited < 10_000 && ended.length === 0; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
      // Cut short: the lake's mark did not move (the maintenance is due again). (Read back to the millisecond at most.)
      expect(Math.abs((await store.lakeMaintainedAt())! - backdated)).toBeLessThan(1);
      expect(ended).toEqual([expect.objectContaining({ pid, signal: 'SIGKILL', exitCode: null, maintaining: true, loading: false })]);
      // A process this loader stops itself (renewal, close) is not reported.
      loader.prewarm();
      const prewarmed = await firstLoadProcess();
      loader.close();
      // Until the process the loader stopped is reaped (gone from /proc, not even a zombie): the
      // loader hears of its end as it reaps it, so an end it reported would be in by then.
      for (let waited = 0; waited < 10_000 && existsSync(`/proc/${prewarmed}`); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(existsSync(`/proc/${prewarmed}`)).toBe(false);
      expect(ended).toHaveLength(1);
    } finally {
      loader.close();
      await store.close();
    }
  }, 90_000);

  it('loads two data directories asked at once, one after the other, each whole', async () => {
    const loader = new WarmLoader();
    const [a, b] = await Promise.all([landedSample(emulator, 'run-a'), landedSample(emulator, 'run-b')]);
    const [loadedA, loadedB] = await Promise.all([loader.load(a.dataDir), loader.load(b.dataDir)]);
    expect(loadedA.landingsLoaded).toBe(a.expected.landings);
    expect(loadedB.landingsLoaded).toBe(b.expected.landings);
    loader.close();
  });

  it('names the data directory and the reason when a load fails, and loads again after an abort', async () => {
    const loader = new WarmLoader();
    const notADir = join(mkdtempSync(join(tmpdir(), 'warm-loader-')), 'file');
    writeFileSync(notADir, 'x');
    await expect(loader.load(notADir)).rejects.toThrow(new RegExp(`the load of ${notADir} failed: .+`));

    const { dataDir, expected } = await landedSample(emulator, 'run-abort');
    const aborted = new AbortController();
    const loading = loader.load(dataDir, aborted.signal);
    aborted.abort(new Error('cancelled by the test'));
    await expect(loading).rejects.toThrow('cancelled by the test');
    // Whatever the killed load committed stays loaded once; the rest loads now.
    const rest = await loader.load(dataDir);
    expect(rest.landingsLoaded).toBeLessThanOrEqual(expected.landings);
    expect(await itemCount(dataDir)).toBe(expected.itemIds.size);
    loader.close();
  });

  it('does not keep its parent alive: a process that loaded exits at once', async () => {
    const { dataDir, expected } = await landedSample(emulator, 'run-exit');
    const script = `
      import { WarmLoader } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'warm-loader.js'))};
      const result = await new WarmLoader().load(process.argv[1]);
      console.log(result.landingsLoaded);`;
    // The load process stays for the life of its parent: a parent it held open is killed at 30 s and fails this.
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, dataDir], { timeout: 30_000 });
    expect(Number(stdout.trim())).toBe(expected.landings);
  });

  it('ends when the worker that started it is killed (SIGKILL), instead of lingering', async () => {
    const script = `
      import { WarmLoader } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'warm-loader.js'))};
      new WarmLoader().prewarm();
      setInterval(() => undefined, 1000);`;
    const worker = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    const childrenFile = `/proc/${worker.pid}/task/${worker.pid}/children`;
    let loadProcess: number | undefined;
    for (let waited = 0; loadProcess === undefined && waited < 10_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const children = readFileSync(childrenFile, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      loadProcess = children.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('load-process.js'));
    }
    expect(loadProcess).toBeDefined();
    worker.kill('SIGKILL');
    let alive = true;
    for (let waited = 0; alive && waited < 15_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      alive = existsSync(`/proc/${loadProcess}`) && !/\) [ZX] /.test(readFileSync(`/proc/${loadProcess}/stat`, 'utf8'));
    }
    expect(alive).toBe(false);
  });
});
