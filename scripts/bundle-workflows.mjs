#!/usr/bin/env node
/**
 * Bundles the built workflows (dist/workflows/index.js, from tsc) for Temporal's workflow sandbox
 * into dist/workflow-bundle.js, once, at build time. Workers load this file instead of running
 * webpack on every start, which cost about 3 s of every `harvester run`. `npm run build` runs it
 * after tsc; run it again whenever the compiled workflows or anything they import change.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';

const dist = new URL('../dist/', import.meta.url).pathname;
// webpack names modules by their path from here, which the worker's stale-bundle check reads.
process.chdir(new URL('..', import.meta.url).pathname);
const started = Date.now();
// webpack's INFO report would bury the build's output; warnings and errors still show.
const { code } = await bundleWorkflowCode({ workflowsPath: join(dist, 'workflows', 'index.js'), logger: new DefaultLogger('WARN') });
const out = join(dist, 'workflow-bundle.js');
writeFileSync(out, code);
process.stderr.write(`bundled the workflows into ${out} (${Math.round(code.length / 1024)} KB, ${Date.now() - started} ms)\n`);
