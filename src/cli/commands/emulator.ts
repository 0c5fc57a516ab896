import { Command } from 'commander';
import { EMULATOR_DEFAULTS, startEmulator } from '../../emulator/server.js';
import { collectApiKey, durationList, numberBetween, wholeNumber } from '../options.js';

export function emulatorCommand(): Command {
  return new Command('emulator')
    .description('Serve a credit-free emulator of the Social Content Data API (every endpoint and rule of the spec)')
    .option('--host <host>', 'address to listen on', EMULATOR_DEFAULTS.host)
    .option('--port <port>', 'port to listen on (0 picks a free one)', wholeNumber(0, 65_535), EMULATOR_DEFAULTS.port)
    .option('--seed <n>', 'seed of the synthetic world: the same seed gives the same world', wholeNumber(0, 2 ** 31), EMULATOR_DEFAULTS.seed)
    .option('--api-key <key>', 'an API key that exists at start (repeatable); one is made up when none is given', collectApiKey)
    .option('--credits <n>', 'starting balance of each key', wholeNumber(0), EMULATOR_DEFAULTS.credits)
    .option('--rate-limit <req_per_s>', 'token bucket per key: refill rate and size', numberBetween(0.001, 1e9), EMULATOR_DEFAULTS.rateLimit)
    .option('--fault-rate <r>', 'fraction of /v1 requests answered 500, 502 or 503', numberBetween(0, 1), EMULATOR_DEFAULTS.faultRate)
    .option('--latency-ms <m>', 'added to every /v1 answer', wholeNumber(0), EMULATOR_DEFAULTS.latencyMs)
    .option('--cursor-ttl <seconds>', 'how long a list cursor stays valid', wholeNumber(1), EMULATOR_DEFAULTS.cursorTtlSeconds)
    .option('--job-step-ms <ms>', 'time a job spends queued, then running', wholeNumber(0), EMULATOR_DEFAULTS.jobStepMs)
    .option('--webhook-retry-schedule <ms,...>', 'delays between webhook delivery retries (default 5s,5m,30m,2h,5h,10h,10h)', durationList)
    .addHelpText(
      'after',
      `
Examples:
  $ harvester emulator
  $ harvester emulator --port 9000 --seed 7 --api-key sk_live_team_a --credits 50000
  $ harvester emulator --fault-rate 0.1 --rate-limit 5 --latency-ms 50

Admin API (loopback only): GET /_emulator/catalog, POST /_emulator/keys, POST /_emulator/plan,
GET /_emulator/ledger, GET /_emulator/deliveries, POST /_emulator/clock, POST /_emulator/faults. OpenAPI: GET /openapi.json.
Webhook deliveries trust the CAs in NODE_EXTRA_CA_CERTS.`,
    )
    .action(async (options: {
      host: string;
      port: number;
      seed: number;
      apiKey?: string[];
      credits: number;
      rateLimit: number;
      faultRate: number;
      latencyMs: number;
      cursorTtl: number;
      jobStepMs: number;
      webhookRetrySchedule?: number[];
    }) => {
      const emulator = await startEmulator({
        host: options.host,
        port: options.port,
        seed: options.seed,
        apiKeys: options.apiKey,
        credits: options.credits,
        rateLimit: options.rateLimit,
        faultRate: options.faultRate,
        latencyMs: options.latencyMs,
        cursorTtlSeconds: options.cursorTtl,
        jobStepMs: options.jobStepMs,
        webhookRetryScheduleMs: options.webhookRetrySchedule,
      });
      // Listened to before the lines that say it serves: a script may stop it the moment it reads them.
      const stop = () => {
        void emulator.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      // The base URL and key go to stdout, one per line, so scripts can read them.
      process.stdout.write(`SOCIAL_API_BASE_URL=${emulator.baseUrl}\n`);
      for (const key of emulator.apiKeys) process.stdout.write(`SOCIAL_API_KEY=${key}\n`);
      process.stderr.write(`emulator: serving ${emulator.baseUrl} (seed ${options.seed}, ${options.credits} credits per key); Ctrl-C stops it\n`);
    });
}
