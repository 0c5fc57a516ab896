/**
 * Preloaded into a benchmarked command (`node --import bench/report-max-rss.mjs ...`): as it exits,
 * it writes its peak resident set to stderr as a line `max-rss-kib <n>`, written synchronously so
 * that an exit through process.exit() still has it.
 */
import { writeSync } from 'node:fs';

process.on('exit', () => writeSync(2, `max-rss-kib ${process.resourceUsage().maxRSS}\n`));
