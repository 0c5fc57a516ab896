import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * Workflows run in Temporal's deterministic sandbox and are replayed from history: anything that
 * does I/O, reads the clock or the file system, or opens connections must stay in activities and
 * src/. Type-only imports are erased by tsc and may come from anywhere.
 */
const WORKFLOW_FORBIDDEN_IMPORTS = {
  paths: [
    ...['fs', 'fs/promises', 'path', 'os', 'child_process', 'crypto', 'http', 'https', 'net', 'worker_threads'].map((name) => ({ name, message: 'Node built-ins do I/O or differ between replays: keep them in activities/ or src/.' })),
    ...['undici', '@duckdb/node-api', 'pino', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'].map((name) => ({ name, message: 'I/O modules belong in activities/ or src/, not in deterministic workflow code.' })),
  ],
  patterns: [
    { group: ['node:*'], message: 'Node built-ins do I/O or differ between replays: keep them in activities/ or src/.' },
    {
      // src/harvest is the pure domain, and src/api-catalog/endpoints.ts plain data (the endpoint catalog).
      regex: '^\\.\\./src/(?!(api-catalog/endpoints|harvest/[^/]+)\\.js$)',
      allowTypeImports: true,
      message: 'Workflows may import only types from src/ (and the pure endpoint catalog): src/ modules do I/O.',
    },
    { group: ['../activities/**'], allowTypeImports: true, message: 'Workflows call activities through proxyActivities; import only their types.' },
  ],
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
    files: ['workflows/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', WORKFLOW_FORBIDDEN_IMPORTS] },
  },
);
