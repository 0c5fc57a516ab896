/**
 * Shared storage's settings, read from the environment without loading its clients (the S3 SDK and
 * PostgreSQL's), which the embedded default never needs: the warehouse reads them to find the lake.
 */
import { EnvironmentError } from '../../config/environment.js';

export interface ObjectStorageSettings {
  bucket: string;
  /** Without leading or trailing slash; empty for the bucket's root. */
  prefix: string;
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/** The settings of an `s3://bucket/prefix` URL and the AWS_* variables. */
export function objectStorageSettings(url: string, env: NodeJS.ProcessEnv): ObjectStorageSettings {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!match) throw new EnvironmentError(`HARVESTER_STORAGE is neither a directory nor s3://bucket/prefix: ${JSON.stringify(url)}`);
  const endpoint = env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL;
  if (endpoint !== undefined) {
    try {
      new URL(endpoint);
    } catch {
      throw new EnvironmentError(`AWS_ENDPOINT_URL is not a URL: ${JSON.stringify(endpoint)}`);
    }
  }
  return {
    bucket: match[1]!,
    prefix: match[2]!.replace(/\/+$/, ''),
    ...(endpoint ? { endpoint } : {}),
    region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
    ...(env.AWS_ACCESS_KEY_ID ? { accessKeyId: env.AWS_ACCESS_KEY_ID } : {}),
    ...(env.AWS_SECRET_ACCESS_KEY ? { secretAccessKey: env.AWS_SECRET_ACCESS_KEY } : {}),
  };
}

/** The URL of the bucket and prefix the store keeps its objects under: `s3://bucket/prefix/` (ObjectStorage.url('')). */
export function storageRootUrl(settings: Pick<ObjectStorageSettings, 'bucket' | 'prefix'>): string {
  return `s3://${settings.bucket}/${settings.prefix === '' ? '' : `${settings.prefix}/`}`;
}

/** A PostgreSQL URL with its password replaced, for messages and logs. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

