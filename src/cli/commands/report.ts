import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { loadReportData } from '../../report/report-data.js';
import { renderReport } from '../../report/render-report.js';

export function reportCommand(): Command {
  return new Command('report')
    .description(
      'Write a self-contained HTML report of the warehouse: credits per harvest and endpoint, cost per item, items landed per run, views and followers over time for the top items and accounts, engagement rate, fastest-growing items, enrichment coverage, failures',
    )
    .option('--out <file>', 'the HTML file to write (replaced if it exists)', 'report.html')
    .addHelpText(
      'after',
      `
Reads <data dir>/warehouse.duckdb read-only (HARVESTER_DATA_DIR, default ./data).
The page is one file of CSS and SVG charts (drawn by Vega-Lite as the report is
made): no scripts, and nothing is loaded from the network, so it opens offline
and can be mailed or archived as is. Its only links are the items' own pages.
Times are UTC.

Example:
  $ harvester report --out reports/$(date +%F).html`,
    )
    .action(async (options: { out: string }) => {
      const dataDir = dataDirFromEnv();
      const html = await renderReport(await loadReportData(dataDir));
      const out = resolve(options.out);
      mkdirSync(dirname(out), { recursive: true });
      // Written beside the target and renamed over it, so a browser never shows half a report.
      const temporary = `${out}.${process.pid}.tmp`;
      writeFileSync(temporary, html);
      renameSync(temporary, out);
      process.stderr.write(`wrote the report to ${out} (${Math.ceil(Buffer.byteLength(html) / 1024)} KB)\n`);
    });
}
