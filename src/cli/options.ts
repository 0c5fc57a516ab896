import { InvalidArgumentError } from 'commander';

/** Argument parsers for commander that reject bad values with a message naming the value. */

export function wholeNumber(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return Number(value);
  };
}

export function numberBetween(min: number, max: number) {
  return (value: string): number => {
    const parsed = Number(value);
    if (value.trim() === '' || !Number.isFinite(parsed) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`expected a number from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return parsed;
  };
}

export function collectApiKey(value: string, previous: string[] = []): string[] {
  if (!/^sk_live_[A-Za-z0-9_]+$/.test(value)) throw new InvalidArgumentError('API keys start with sk_live_ followed by letters, digits or _');
  return [...previous, value];
}

export function durationList(value: string): number[] {
  const parts = value.split(',').map((part) => part.trim());
  const delays = parts.map(Number);
  if (parts.some((part) => part === '') || delays.some((delay) => !Number.isInteger(delay) || delay < 0)) {
    throw new InvalidArgumentError(`expected comma-separated milliseconds like 100,200,400, got ${JSON.stringify(value)}`);
  }
  return delays;
}

/** A bad combination of arguments found in a command's action: printed as a message, exit 1. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A point in time as ISO 8601 with its zone (`2026-11-24T06:00:00Z`), as epoch milliseconds. */
export function isoTime(value: string): number {
  const parsed = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:?\d{2})$/.test(value) || Number.isNaN(parsed)) {
    throw new InvalidArgumentError(`expected a time in ISO 8601 with its zone, like 2026-11-24T06:00:00Z, got ${JSON.stringify(value)}`);
  }
  return parsed;
}
