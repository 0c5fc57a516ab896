/**
 * `harvester worker` processes a test starts itself (with `--config`, for budgets across runs), and
 * what they serve: started, read from, and stopped alike by every test that needs real processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './cli.js';
import { waitFor } from './emulator.js';

export interface CliWorker {
  process: ChildProcess;
  metricsUrl: string;
  log: () => string;
}

/** Starts `harvester worker --config configFile` with `env` added to this process's; resolves once it serves metrics and polls. */
export async function startCliWorker(configFile: string, env: NodeJS.ProcessEnv, started: ChildProcess[], waitMs = 30_000): Promise<CliWorker> {
  const child = spawn(process.execPath, [CLI, 'worker', '--metrics-port', '0', '--config', configFile], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  started.push(child);
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  const metricsUrl = await waitFor(() => /metrics at (http:\/\/\S+\/metrics)/.exec(log)?.[1], waitMs, `the worker to serve metrics (its log: ${log})`);
  await waitFor(() => (/polling task queue/.test(log) ? true : undefined), waitMs, 'the worker to poll');
  return { process: child, metricsUrl, log: () => log };
}

/** Stops every worker still running with SIGTERM, one after the other, each awaited to its exit. */
export async function stopCliWorkers(workers: readonly ChildProcess[]): Promise<void> {
  for (const worker of workers) {
    if (worker.exitCode !== null || worker.signalCode !== null) continue;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
}

/** The value of a metric's series for a budget, as the worker serves it. */
export async function budgetMetric(metricsUrl: string, name: string, budget: string): Promise<number | undefined> {
  const line = (await (await fetch(metricsUrl)).text()).split('\n').find((candidate) => candidate.startsWith(`${name}{budget="${budget}"}`));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}
