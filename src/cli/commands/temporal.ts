import { spawn } from 'node:child_process';
import { Command } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { TEMPORAL_BINARY, devServerArgs, recordDevServer, runningDevServer, servedAlready } from '../../temporal/dev-server.js';
import { devServerDbFile } from '../../store/layout.js';
import { httpPortBeside } from '../../temporal/settings.js';
import { makeDirectory } from '../../store/make-directory.js';
import { wholeNumber } from '../options.js';

export function temporalCommand(): Command {
  return new Command('temporal')
    .description('Run the embedded Temporal dev server, persistent in a SQLite file under the data directory')
    .option('--port <port>', 'gRPC port', wholeNumber(1, 65_535), 7233)
    .option('--http-port <port>', 'HTTP API port, where `harvester run` starts runs (default: the gRPC port + 10, Temporal\'s convention)', wholeNumber(1, 65_535))
    .option('--ui-port <port>', 'web UI port', wholeNumber(1, 65_535), 8233)
    .addHelpText('after', '\nUses the Temporal CLI that `npm run setup` installed in .tools/.\n\nExample:\n  $ harvester temporal   # UI at http://127.0.0.1:8233')
    .action(async (options: { port: number; httpPort?: number; uiPort: number }) => {
      const httpPort = options.httpPort ?? httpPortBeside(options.port);
      const dataDir = dataDirFromEnv();
      makeDirectory(dataDir);
      const running = await runningDevServer(dataDir);
      if (running) throw new Error(servedAlready(dataDir, running));
      const child = spawn(TEMPORAL_BINARY, devServerArgs({ port: options.port, httpPort, uiPort: options.uiPort, dbFile: devServerDbFile(dataDir) }), { stdio: 'inherit' });
      // Recorded at once: the demo, started meanwhile, finds the server once it answers.
      const forget = child.pid ? recordDevServer(dataDir, { pid: child.pid, address: `127.0.0.1:${options.port}`, httpAddress: `127.0.0.1:${httpPort}`, uiUrl: `http://127.0.0.1:${options.uiPort}`, by: 'temporal' }) : undefined;
      const stop = () => child.kill('SIGTERM');
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      try {
        await new Promise<void>((resolve, reject) => {
          child.once('error', (error) => reject(new Error(`cannot start ${TEMPORAL_BINARY}: ${error.message}; run \`npm run setup\``)));
          child.once('exit', () => resolve());
        });
      } finally {
        forget?.();
      }
    });
}
