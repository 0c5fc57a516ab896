/**
 * S3-compatible object storage (AWS S3, MinIO, R2, GCS's S3 interface) under one bucket and
 * prefix: what shared storage keeps landings, quarantine and media in. Configured like any S3
 * client: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, and AWS_ENDPOINT_URL (or
 * AWS_ENDPOINT_URL_S3) for a store that is not AWS.
 */
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, NoSuchKey, NotFound, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { storageRootUrl, type ObjectStorageSettings } from './shared-settings.js';

/** An object store failed: says which object and what happened, never a credential. */
export class ObjectStorageError extends Error {
  override readonly name = 'ObjectStorageError';
  constructor(action: string, where: string, cause: unknown) {
    super(`cannot ${action} ${where}: ${(cause as Error).name}: ${(cause as Error).message}`, { cause });
  }
}

/** Objects fetched at once by getEach. */
const GETS_AT_ONCE = 16;

export class ObjectStorage {
  private readonly client: S3Client;

  constructor(readonly settings: ObjectStorageSettings) {
    // The SDK warns, once per process, that its versions from January 2027 on will need Node 22;
    // package.json pins a version that supports the Node 20 this project supports, so the warning
    // is noise on every worker's stderr.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint, forcePathStyle: true } : {}),
      ...(settings.accessKeyId && settings.secretAccessKey ? { credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey } } : {}),
    });
  }

  /** The object's URL, for messages: `s3://bucket/prefix/key`. */
  url(key: string): string {
    return `${storageRootUrl(this.settings)}${key}`;
  }

  async put(key: string, body: string | Uint8Array): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.settings.bucket, Key: this.fullKey(key), Body: body }));
    } catch (error) {
      throw new ObjectStorageError('write', this.url(key), error);
    }
  }

  /** The object's bytes, or undefined when there is none. */
  async get(key: string): Promise<Buffer | undefined> {
    try {
      const answer = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: this.fullKey(key) }));
      return Buffer.from(await answer.Body!.transformToByteArray());
    } catch (error) {
      if (error instanceof NoSuchKey) return undefined;
      throw new ObjectStorageError('read', this.url(key), error);
    }
  }

  /**
   * Fetches each object of `keys`, GETS_AT_ONCE at a time, and hands each one found to `each`
   * (an object deleted meanwhile is skipped): how the loader stages what it is to load.
   */
  async getEach(keys: readonly string[], each: (key: string, bytes: Buffer) => unknown): Promise<void> {
    for (let start = 0; start < keys.length; start += GETS_AT_ONCE) {
      await Promise.all(
        keys.slice(start, start + GETS_AT_ONCE).map(async (key) => {
          const bytes = await this.get(key);
          if (bytes) await each(key, bytes);
        }),
      );
    }
  }

  async exists(key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.settings.bucket, Key: this.fullKey(key) }));
      return true;
    } catch (error) {
      if (error instanceof NotFound || (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false;
      throw new ObjectStorageError('look up', this.url(key), error);
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.fullKey(key) }));
    } catch (error) {
      throw new ObjectStorageError('delete', this.url(key), error);
    }
  }

  /** The keys (relative to the prefix) of every object whose key starts with `under`. */
  async list(under: string): Promise<string[]> {
    return (await this.listSized(under)).map((object) => object.key);
  }

  /** Every object whose key starts with `under`: its key (relative to the prefix) and size in bytes. */
  async listSized(under: string): Promise<{ key: string; size: number }[]> {
    const objects: { key: string; size: number }[] = [];
    const strip = this.settings.prefix === '' ? 0 : this.settings.prefix.length + 1;
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.settings.bucket, Prefix: this.fullKey(under), ContinuationToken: token }));
        for (const object of page.Contents ?? []) if (object.Key) objects.push({ key: object.Key.slice(strip), size: object.Size ?? 0 });
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (error) {
      throw new ObjectStorageError('list', this.url(under), error);
    }
    return objects;
  }

  /** Makes the bucket, unless this account has it already. */
  async createBucket(): Promise<void> {
    try {
      await this.client.send(new CreateBucketCommand({ Bucket: this.settings.bucket }));
    } catch (error) {
      if ((error as Error).name !== 'BucketAlreadyOwnedByYou') throw new ObjectStorageError('make the bucket', `s3://${this.settings.bucket}`, error);
    }
  }

  close(): void {
    this.client.destroy();
  }

  private fullKey(key: string): string {
    return this.settings.prefix === '' ? key : `${this.settings.prefix}/${key}`;
  }
}
