import { dirname, join, relative, sep } from 'node:path';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Node built-ins and modules that do I/O: never in the workflow sandbox, nor in what it imports. */
const IO_MODULES = {
  paths: [
    ...['fs', 'fs/promises', 'path', 'os', 'child_process', 'crypto', 'http', 'https', 'net', 'worker_threads'].map((name) => ({ name, message: 'Node built-ins do I/O or differ between replays: keep them in activities/ or src/.' })),
    ...['undici', '@duckdb/node-api', 'pino', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'].map((name) => ({ name, message: 'I/O modules belong in activities/ or src/, not in deterministic workflow code or the pure harvest domain.' })),
  ],
  patterns: [{ group: ['node:*'], message: 'Node built-ins do I/O or differ between replays: keep them in activities/ or src/.' }],
};

/** The rooms whose code runs in (or is imported into) Temporal's deterministic workflow sandbox. */
const SANDBOX_ROOMS = ['workflows', 'src/harvest', 'src/api-catalog'];

/** The leaves every room that does I/O may use: each imports packages only, so no arrow from it runs back up. */
const IO_LEAVES = ['src/logger.ts', 'src/project-paths.ts'];

/**
 * The rooms of docs/architecture.md and what each may import, as allow-lists: a room imports
 * itself, what `imports` names, and (as `import type` only) what `types` names; anything else is
 * an error, so a new room or a new arrow has to be written here, and in the docs' table, first.
 * A path names a folder (and everything in it) or one file. Every file under src/, workflows/ and
 * activities/ must be in one room (the longest path that holds it).
 */
export const ROOMS = [
  { room: 'src/api-catalog', imports: [], why: 'The API catalog is the bottom of the house: shared by the client, the emulator and the domain, it imports nothing.' },
  { room: 'src/text', imports: [], why: 'Text formats (CSV) are a leaf shared by the emulator and the CLI.' },
  { room: 'src/logger.ts', imports: [], why: 'The logger is a leaf: it imports pino only.' },
  { room: 'src/project-paths.ts', imports: [], why: 'The project\'s own folders are a leaf: Node built-ins only.' },
  { room: 'src/metrics', imports: [], why: 'The worker\'s metrics are a leaf: prom-client only.' },
  { room: 'src/harvest', imports: ['src/api-catalog'], why: 'src/harvest is the pure harvest domain, imported into the workflow sandbox: it imports only the API catalog.' },
  { room: 'src/api', imports: ['src/api-catalog', 'src/logger.ts'], why: 'The API client imports only the API catalog (and the logger).' },
  { room: 'src/config', imports: ['src/harvest', 'src/api-catalog', 'src/project-paths.ts'], why: 'Config reads files into the domain\'s types.' },
  { room: 'src/store', imports: ['src/harvest', 'src/api-catalog', 'src/config', ...IO_LEAVES], why: 'The store is below every room that uses it.' },
  { room: 'src/warehouse', imports: ['src/store', 'src/harvest', 'src/api-catalog', ...IO_LEAVES], why: 'The warehouse reads the store, never the rooms above it.' },
  { room: 'src/report', imports: ['src/warehouse', 'src/store', 'src/harvest', 'src/api-catalog'], why: 'The report reads the warehouse.' },
  {
    room: 'src/emulator',
    imports: ['src/api-catalog', 'src/config/prices.ts', 'src/text'],
    why: 'The emulator is a product of its own: besides the catalog it reads only the published price table (and writes CSV).',
  },
  {
    room: 'activities',
    imports: ['src/api', 'src/store', 'src/warehouse', 'src/harvest', 'src/config', 'src/api-catalog', 'src/metrics', ...IO_LEAVES],
    why: 'Activities are thin glue over src/api, src/store, src/warehouse and src/harvest; never workflows/, src/cli, src/webhooks or src/temporal.',
  },
  {
    // Workflows run in Temporal's deterministic sandbox and are replayed from history.
    room: 'workflows',
    imports: ['src/harvest', 'src/api-catalog'],
    types: ['activities', 'src/store'],
    why: 'Workflows import the pure domain and the API catalog; activities (called through proxyActivities) and the store only as types; nothing from src/api.',
  },
  {
    room: 'src/temporal',
    imports: ['workflows', 'activities', 'src/api', 'src/api-catalog', 'src/config', 'src/harvest', 'src/store', 'src/warehouse', 'src/metrics', ...IO_LEAVES],
    why: 'Temporal\'s connections, worker and schedules sit above the work they run and below src/webhooks and src/cli.',
  },
  {
    room: 'src/webhooks',
    imports: ['src/store', 'src/temporal', 'workflows/definitions.ts', 'src/api-catalog', 'src/logger.ts'],
    why: 'The receiver imports the store, Temporal and of the workflows only their public face (workflows/definitions.ts).',
  },
  { room: 'src/cli', imports: ['src', 'workflows', 'activities'], why: 'The CLI composes everything.' },
];

const ROOT = import.meta.dirname;
const ROOM_FOLDERS = ['src', 'workflows', 'activities'];
const withoutExtension = (path) => path.replace(/\.(ts|js|mjs|cjs)$/, '');
const holds = (room, path) => withoutExtension(path) === withoutExtension(room) || path.startsWith(`${room}/`);
const roomOf = (path) => ROOMS.filter(({ room }) => holds(room, path)).sort((a, b) => b.room.length - a.room.length)[0];

/** An import is allowed if it stays in its room or reaches what the room's allow-list names. */
const roomsRule = {
  meta: { type: 'problem', docs: { description: 'Each room imports only what its allow-list in eslint.config.js names.' }, schema: [] },
  create(context) {
    const file = relative(ROOT, context.filename).split(sep).join('/');
    if (!ROOM_FOLDERS.some((folder) => file.startsWith(`${folder}/`))) return {};
    const own = roomOf(file);
    if (!own) {
      return { Program: (node) => context.report({ node, message: `${file} is in no room: add it to ROOMS in eslint.config.js and to the table in docs/architecture.md.` }) };
    }
    const check = (node, specifier, typeOnly) => {
      if (typeof specifier !== 'string' || !specifier.startsWith('.')) return;
      const target = relative(ROOT, join(ROOT, dirname(file), specifier)).split(sep).join('/');
      if (holds(own.room, target) || own.imports.some((room) => holds(room, target))) return;
      if (typeOnly && (own.types ?? []).some((room) => holds(room, target))) return;
      const allowed = [...own.imports, ...(own.types ?? []).map((room) => `${room} (types)`)].join(', ') || 'nothing';
      context.report({ node, message: `${own.room} may import ${allowed}; not ${target}. ${own.why}` });
    };
    const onlyTypes = (kind, specifiers) => kind === 'type' || (specifiers.length > 0 && specifiers.every((specifier) => (specifier.importKind ?? specifier.exportKind) === 'type'));
    return {
      ImportDeclaration: (node) => check(node.source, node.source.value, onlyTypes(node.importKind, node.specifiers)),
      ExportNamedDeclaration: (node) => node.source && check(node.source, node.source.value, onlyTypes(node.exportKind, node.specifiers)),
      ExportAllDeclaration: (node) => check(node.source, node.source.value, node.exportKind === 'type'),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node.source, node.source.value, false),
      TSImportType: (node) => check(node.source, node.source?.value, true),
    };
  },
};

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
  {
    files: ROOM_FOLDERS.map((folder) => `${folder}/**/*.ts`),
    plugins: { rooms: { rules: { 'allowed-imports': roomsRule } } },
    rules: { 'rooms/allowed-imports': 'error' },
  },
  {
    files: SANDBOX_ROOMS.map((room) => `${room}/**/*.ts`),
    rules: { '@typescript-eslint/no-restricted-imports': ['error', IO_MODULES] },
  },
);
