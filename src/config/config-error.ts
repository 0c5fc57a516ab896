/**
 * An error in a configuration file. The message names the file, the line when it is known, the
 * field (a path like `harvests[0].channels[1].handle`) and what is wrong:
 * `FILE:LINE: FIELD: MESSAGE`, or `FILE: FIELD: MESSAGE` without a line.
 *
 * No Node built-ins here: workflow code may catch and inspect these errors.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly file: string,
    readonly field: string,
    message: string,
    /** 1-based line of the offending text, when known. */
    readonly line?: number,
    /** 1-based column of the offending text, when known; not part of the message. */
    readonly column?: number,
    /** Further problems in the same file, each on a line of its own after this one. */
    readonly more: readonly ConfigError[] = [],
  ) {
    super([`${line === undefined ? file : `${file}:${line}`}: ${field}: ${message}`, ...more.map((problem) => problem.message)].join('\n'));
  }
}
