import { constants } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { apiIdentity } from '../../api/identity.js';
import { dataDirectoryIdentity } from '../../store/store-identity.js';
import { findHarvest, loadHarvestConfig } from '../../config/harvest-config.js';
import { dataDirFromEnv } from '../../config/environment.js';
import { CONFIG_DIR } from '../../project-paths.js';
import { connectClient } from '../../temporal/connection.js';
import { DEFAULT_TEMPORAL_ADDRESS } from '../../temporal/settings.js';
import { devServerDbFile, lakeCatalogFile } from '../../store/layout.js';
import { pythonReaderLine } from '../analyst-tools.js';
import { queryWarehouse } from '../../warehouse/query.js';
import { freePort } from '../free-port.js';
import { startStack, type Stack } from '../stack.js';
import { untilStopSignal } from '../stack-signals.js';
import { resultWithProgress } from '../run-progress.js';
import { textTable } from '../text-table.js';
import { harvestWorkflow } from '../../../workflows/harvest.js';
import { summaryText } from './run.js';

/** The questions the demo answers from the warehouse once its harvest has landed. */
const ANALYST_QUESTIONS: { title: string; sql: string }[] = [
  {
    title: 'What did the harvest land, per platform and kind?',
    sql: `SELECT platform, kind, count(*) AS items, count(DISTINCT author_handle) AS accounts FROM items GROUP BY ALL ORDER BY ALL`,
  },
  {
    title: 'Which items are the most viewed?',
    sql: `SELECT i.platform, i.author_handle, i.item_id, m.views, m.likes FROM items i JOIN latest_item_metrics m USING (platform, item_id)
          ORDER BY m.views DESC NULLS LAST LIMIT 5`,
  },
  {
    title: 'Where did the credits go?',
    sql: `SELECT endpoint, count(*) AS calls, sum(units) AS units, sum(credits) AS credits FROM api_calls GROUP BY endpoint ORDER BY credits DESC`,
  },
  {
    title: 'Which search topics ranked which accounts on top?',
    sql: `SELECT h.platform, h.kind, h.query, i.author_handle AS top_account FROM search_hits h JOIN items i USING (platform, item_id) WHERE h.rank = 1 ORDER BY ALL`,
  },
];

const CLI = 'node dist/src/cli/main.js';

/** Where the demo's run can be seen afterwards: Temporal keeps it in the data directory. */
function runLines(stack: Stack, workflowId: string, dataDir: string, keepRunning: boolean): string[] {
  const env = stack.temporalAddress === DEFAULT_TEMPORAL_ADDRESS ? '' : `TEMPORAL_ADDRESS=${stack.temporalAddress} `;
  if (stack.reusedTemporal || keepRunning) {
    return [
      `  the run:    ${env}${CLI} show ${workflowId}   (also runs, replay ${workflowId})`,
      `  Temporal UI: ${stack.uiUrl ?? 'none (the server runs headless)'}${stack.reusedTemporal ? '' : ' (Ctrl-C stops the stack)'}`,
    ];
  }
  return [
    `  the run:    ${CLI} temporal   serves it again from ${devServerDbFile(dataDir)} (or ${CLI} dev, the whole stack);`,
    `              then ${CLI} show ${workflowId}   (also runs, replay ${workflowId}), and the Temporal UI on http://127.0.0.1:8233`,
  ];
}

/**
 * The README's main command: starts the local stack (Temporal, emulator, receiver, worker) on free
 * ports, runs config/demo.yaml with live progress, answers a few analyst questions from the
 * warehouse, and says where to look next.
 */
export function demoCommand(): Command {
  return new Command('demo')
    .description('Run the demo harvest end to end on the local stack, then answer a few questions from the warehouse')
    .option('--keep-running', 'leave the stack up afterwards (Ctrl-C stops it), to browse the Temporal UI')
    .addHelpText('after', '\nUses the emulator: nothing real is spent. Data lands in HARVESTER_DATA_DIR (default ./data), and Temporal\nkeeps the run there too (temporal.sqlite): afterwards `harvester temporal` or `harvester dev` serve it again\nfor `runs`, `show` and `replay`. With `harvester dev` running on the same data directory, the demo uses its\nTemporal.\n\nExample:\n  $ harvester demo')
    .action(runDemo);
}

/**
 * The stack up, the demo run and the answers shown, and the stack down. A SIGINT or SIGTERM stops
 * it at any point: the stack is stopped (once it is up, if it was starting), a run started stays
 * open in Temporal's state in the data directory, and the demo exits 128 + the signal's number, as
 * shells report it; with --keep-running, the signal after the demo is its normal end, exit 0.
 */
async function runDemo(options: { keepRunning?: boolean }): Promise<void> {
  const dataDir = dataDirFromEnv();
  let up = false;
  let interrupted: NodeJS.Signals | undefined;
  const stopRequested = untilStopSignal('demo', () => up);
  void stopRequested.then((signal) => (interrupted ??= signal));
  const harvest = findHarvest(loadHarvestConfig(join(CONFIG_DIR, 'demo.yaml')), 'demo');
  process.stdout.write('Starting the local stack: Temporal dev server, API emulator, webhook receiver, worker…\n');
  const [temporalPort, temporalHttpPort, uiPort, emulatorPort, receiverPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  // Temporal keeps the run in the data directory, as `harvester dev` and `harvester temporal` do,
  // so `runs`, `show` and `replay` find it after the demo; a dev server already serving that
  // state (`harvester dev` running) is used instead of a second one.
  const stack = await startStack({ dataDir, emulator: true, persistent: true, reuseTemporal: true, by: 'demo', temporalPort, temporalHttpPort, uiPort, emulatorPort, receiverPort });
  up = true;
  const workflowId = `demo-${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15)}-${Math.random().toString(36).slice(2, 6)}`;
  let runStarted = false;
  try {
    if (interrupted === undefined) {
      const shown = showDemo(stack, dataDir, harvest, workflowId, options.keepRunning === true, () => (runStarted = true));
      // Its failure is thrown below; once interrupted, what it meets as the stack goes down is not.
      shown.catch(() => undefined);
      await Promise.race([shown, stopRequested]);
      if (interrupted === undefined) {
        await shown;
        // The stack stays up for the Temporal UI until Ctrl-C, the demo's normal end.
        if (options.keepRunning) {
          await stopRequested;
          interrupted = undefined;
        }
      }
    }
    if (interrupted) process.stderr.write(`demo: ${interrupted}: stopping the stack${runStarted ? `; run ${workflowId} stays open in Temporal's state in ${dataDir}` : ''}\n`);
  } finally {
    await stack.stop();
  }
  if (interrupted) process.exit(128 + constants.signals[interrupted]);
}

/** The demo run with its progress, the analyst questions answered from the warehouse, and where to look next; with keepRunning, then waits for Ctrl-C. */
async function showDemo(stack: Stack, dataDir: string, harvest: ReturnType<typeof findHarvest>, workflowId: string, keepRunning: boolean, onRunStarted: () => void): Promise<void> {
  const client = await connectClient({ address: stack.temporalAddress, namespace: 'default' });
  try {
    if (stack.reusedTemporal) process.stdout.write(`Temporal: the dev server of \`harvester ${stack.reusedTemporal.by}\` (pid ${stack.reusedTemporal.pid}) at ${stack.temporalAddress}, which keeps this data directory's runs\n`);
    process.stdout.write(`Running the "demo" harvest (config/demo.yaml) as ${workflowId}…\n`);
    const started = Date.now();
    const handle = await client.workflow.start(harvestWorkflow, { taskQueue: stack.taskQueue, workflowId, staticSummary: `demo: budget ${harvest.budget.credits} credits`, args: [{ harvest, api: apiIdentity({ baseUrl: stack.apiBaseUrl, apiKey: stack.apiKey }), store: dataDirectoryIdentity(dataDir) }] });
    onRunStarted();
    const summary = await resultWithProgress(handle);
    process.stdout.write(`\n${summaryText(summary, Date.now() - started)}\n`);
    for (const question of ANALYST_QUESTIONS) {
      const result = await queryWarehouse(dataDir, question.sql);
      const cells = result.rows.map((row) => result.columns.map((column) => String(row[column] ?? '')));
      process.stdout.write(`\n${question.title}\n${textTable(result.columns, cells, { rule: false, indent: '  ' })}\n`);
    }
    process.stdout.write(
      [
        '',
        'Where to look next:',
        `  warehouse:  ${lakeCatalogFile(dataDir)} (a DuckLake; docs/data-dictionary.md: its tables, and pandas, polars and the DuckDB CLI on it)`,
        // Runs as printed, with the Python a user has: setup put DuckDB 1.5.5 (the lake's) and pytz in .tools/analysts.
        `  python:     ${pythonReaderLine(dataDir)}`,
        '  sql:        node dist/src/cli/main.js sql   (DuckDB\'s shell on it, read-only; -c "SQL" for one statement)',
        '  query:      node dist/src/cli/main.js query "SELECT * FROM top_items_per_account WHERE rank_in_account = 1"',
        '  report:     node dist/src/cli/main.js report --out report.html',
        `  logs:       ${stack.logsDir}`,
        ...runLines(stack, workflowId, dataDir, keepRunning),
        '',
      ].join('\n'),
    );
  } finally {
    await client.connection.close();
  }
}
