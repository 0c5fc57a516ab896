import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * Imports point down the rooms of docs/architecture.md, never back up. Each pattern below names
 * rooms by path from any depth (`../`, `../../src/`, ...), so a file in a subfolder is held to its
 * room's rules too. (Dynamic `import()` is not checked by ESLint: the few there are stay within
 * the rules by review.)
 */
function reaching(rooms) {
  return `^(\\.\\./)+(src/)?(${rooms.join('|')})/`;
}

/** Node built-ins and modules that do I/O: never in the workflow sandbox, nor in the pure domain. */
const IO_MODULES = {
  paths: [
    ...['fs', 'fs/promises', 'path', 'os', 'child_process', 'crypto', 'http', 'https', 'net', 'worker_threads'].map((name) => ({ name, message: 'Node built-ins do I/O or differ between replays: keep them in activities/ or src/.' })),
    ...['undici', '@duckdb/node-api', 'pino', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'].map((name) => ({ name, message: 'I/O modules belong in activities/ or src/, not in deterministic workflow code or the pure harvest domain.' })),
  ],
  patterns: [{ group: ['node:*'], message: 'Node built-ins do I/O or differ between replays: keep them in activities/ or src/.' }],
};

/** The rooms each room must not import (type-only imports included, unless the rule says so). */
const ROOM_RULES = [
  {
    // Workflows run in Temporal's deterministic sandbox and are replayed from history.
    room: 'workflows',
    paths: IO_MODULES.paths,
    patterns: [
      ...IO_MODULES.patterns,
      {
        regex: '^(\\.\\./)+src/(?!(harvest/[^/]+|api-catalog/endpoints)\\.js$)',
        allowTypeImports: true,
        message: 'Workflows may import src/harvest (the pure domain) and the endpoint catalog; from the rest of src/, which does I/O, only types.',
      },
      { regex: reaching(['activities']), allowTypeImports: true, message: 'Workflows call activities through proxyActivities; import only their types.' },
    ],
  },
  {
    room: 'src/harvest',
    paths: IO_MODULES.paths,
    patterns: [
      ...IO_MODULES.patterns,
      { regex: '^(?!\\./|\\.\\./api-catalog/)', message: 'src/harvest is the pure harvest domain: it imports only itself and the API catalog.' },
    ],
  },
  { room: 'src/store', patterns: [{ regex: reaching(['workflows', 'activities', 'cli', 'warehouse', 'webhooks', 'temporal', 'report', 'emulator', 'api']), message: 'src/store is below every room that uses it: it imports none of them.' }] },
  { room: 'src/warehouse', patterns: [{ regex: reaching(['workflows', 'activities', 'cli', 'webhooks', 'temporal', 'report', 'emulator', 'api']), message: 'src/warehouse imports src/store and the domain, never the rooms above it.' }] },
  { room: 'activities', patterns: [{ regex: reaching(['workflows', 'cli', 'webhooks', 'temporal', 'report', 'emulator']), message: 'Activities are thin glue over src/api, src/store, src/warehouse and src/harvest.' }] },
  { room: 'src/api', patterns: [{ regex: reaching(['workflows', 'activities', 'cli', 'store', 'warehouse', 'webhooks', 'temporal', 'report', 'emulator', 'harvest', 'config']), message: 'The API client imports only the API catalog.' }] },
  {
    // The emulator is a product of its own; besides the catalog it reads only the published price table.
    room: 'src/emulator',
    patterns: [{ regex: reaching(['workflows', 'activities', 'cli', 'store', 'warehouse', 'webhooks', 'temporal', 'report', 'api', 'harvest']), message: 'The emulator shares only the API catalog (and the price table) with the rest.' }],
  },
  { room: 'src/webhooks', patterns: [{ regex: reaching(['activities', 'cli', 'warehouse', 'report', 'emulator', 'api']), message: 'The receiver imports src/store, the Temporal client and the workflows\' public face.' }] },
  { room: 'src/config', patterns: [{ regex: reaching(['workflows', 'activities', 'cli', 'store', 'warehouse', 'webhooks', 'temporal', 'report', 'emulator', 'api']), message: 'Config reads files into the domain\'s types; it imports only src/harvest and the API catalog.' }] },
  { room: 'src/report', patterns: [{ regex: reaching(['workflows', 'activities', 'cli', 'webhooks', 'temporal', 'emulator', 'api']), message: 'The report reads the warehouse; it imports nothing above it.' }] },
];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tools/', 'data/', 'test-results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: globals.node },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // A promise nobody awaits loses its errors (an unhandled rejection) and its ordering; `void`
    // marks the few that are meant to run on their own. Needs type information.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { '@typescript-eslint/no-floating-promises': 'error' },
  },
  ...ROOM_RULES.map(({ room, paths = [], patterns }) => ({
    files: [`${room}/**/*.ts`],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { paths, patterns }] },
  })),
);
