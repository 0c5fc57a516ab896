/**
 * The harvest config's YAML, read with positions: each value and key keeps the line and column it
 * starts at, `${VAR}` is taken from the environment, and every error names the file, the line and
 * the path of the offending value (`harvests[0].channels[1].handle`).
 */
import { isAlias, isMap, isScalar, isSeq, type Document, type LineCounter } from 'yaml';
import { ConfigError } from './config-error.js';

export type PathSegment = string | number;
export type Path = readonly PathSegment[];
export interface Position {
  line: number;
  col: number;
}

/** `harvests[0].channels[1].handle`; `(document)` for the root. */
export function formatPath(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text === '' ? '(document)' : text;
}

/** Where each value (and each mapping key) of the document starts, by formatted path. */
export class SourceMap {
  private readonly values = new Map<string, Position>();
  private readonly keys = new Map<string, Position>();
  constructor(private readonly lineCounter: LineCounter) {}

  record(kind: 'value' | 'key', path: Path, offset: number | undefined): void {
    if (offset === undefined) return;
    const map = kind === 'value' ? this.values : this.keys;
    const key = formatPath(path);
    if (!map.has(key)) map.set(key, this.lineCounter.linePos(offset));
  }

  /** The key's line for a mapping entry (where a reader looks), else the value's; else the nearest ancestor's. */
  positionOf(path: Path): Position {
    for (let length = path.length; length >= 0; length--) {
      const key = formatPath(path.slice(0, length));
      const found = this.keys.get(key) ?? this.values.get(key);
      if (found) return found;
    }
    return { line: 1, col: 1 };
  }
}

/** Guards against alias bombs: no sane harvest file has this many nodes. */
const MAX_NODES = 100_000;

export class Reader {
  private nodes = 0;
  private readonly expanding = new Set<unknown>();

  constructor(
    private readonly doc: Document,
    private readonly file: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly source: SourceMap,
  ) {}

  /** The plain value of a node, `${VAR}` substituted in strings, with positions recorded by path. */
  read(node: unknown, path: Path): unknown {
    if (++this.nodes > MAX_NODES) this.fail(path, `more than ${MAX_NODES} values (an alias expanding too far?)`);
    if (node === null || node === undefined) return null;
    if (isAlias(node)) {
      const target = node.resolve(this.doc);
      if (target === undefined) this.fail(path, `alias *${node.source} refers to no anchor`);
      if (this.expanding.has(target)) this.fail(path, `alias *${node.source} contains itself`);
      this.expanding.add(target);
      try {
        this.source.record('value', path, node.range?.[0]);
        return this.read(target, path);
      } finally {
        this.expanding.delete(target);
      }
    }
    if (isScalar(node)) {
      this.source.record('value', path, node.range?.[0]);
      if (typeof node.value !== 'string') return node.value;
      const text = this.substitute(node.value, path);
      return node.type === 'PLAIN' && text !== node.value ? retype(text) : text;
    }
    if (isSeq(node)) {
      this.source.record('value', path, node.range?.[0]);
      return node.items.map((item, index) => this.read(item, [...path, index]));
    }
    if (isMap(node)) {
      this.source.record('value', path, node.range?.[0]);
      const result: Record<string, unknown> = {};
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        const childPath = [...path, key];
        const keyNode = pair.key as { range?: [number, number, number] } | null;
        this.source.record('key', childPath, keyNode?.range?.[0]);
        // defineProperty: a key named __proto__ must stay a plain key.
        Object.defineProperty(result, key, { value: this.read(pair.value, childPath), enumerable: true, writable: true, configurable: true });
      }
      return result;
    }
    return this.fail(path, 'unsupported YAML node');
  }

  /** `${VAR}` from the environment; `$${VAR}` is a literal `${VAR}`. */
  private substitute(text: string, path: Path): string {
    return text.replace(/\$(\$?)\{([^}]*)\}/g, (_match, escape: string, name: string) => {
      if (escape) return `\${${name}}`;
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        this.fail(path, `\${${name}} is not a variable reference: write \${NAME} with NAME of letters, digits and _, or $\${...} for a literal \${...}`);
      }
      const value = this.env[name];
      if (value === undefined) {
        this.fail(path, `environment variable ${name} is not set (needed by \${${name}}); set it, or write $\${${name}} for a literal \${${name}}`);
      }
      return value;
    });
  }

  private fail(path: Path, message: string): never {
    const position = this.source.positionOf(path);
    throw new ConfigError(this.file, formatPath(path), message, position.line, position.col);
  }
}

/**
 * A plain (unquoted) scalar keeps YAML's typing after substitution, so `credits: ${BUDGET}` is a
 * number; quoted scalars stay strings.
 */
function retype(text: string): unknown {
  if (/^[-+]?(?:\d+|\d*\.\d+)(?:[eE][-+]?\d+)?$/.test(text)) return Number(text);
  if (text === 'true' || text === 'false') return text === 'true';
  return text;
}

export function yamlErrorText(code: string, message: string, sourceLine: string): string {
  const text = message.replace(/ at line \d+, column \d+:[\s\S]*$/, '').trim();
  if (code === 'BAD_ALIAS' || code === 'BAD_SCALAR_START') {
    return `${text} (a value starting with *, &, @, \` or another YAML indicator must be quoted, e.g. cron: "* * * * *")`;
  }
  if (sourceLine.includes('${')) {
    return `${text} (inside { } or [ ], a \${VAR} value must be quoted; for a number from a variable, use block style: credits: \${VAR} on its own line)`;
  }
  return text;
}
