/**
 * The ports `harvester dev --distributed` starts PostgreSQL and MinIO on (src/cli/service-ports.ts),
 * with real listeners on 127.0.0.1 holding ports as another process would: a given port that is
 * taken is refused, naming its option; a remembered one that is taken is given up for a free one.
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { choosePorts, portFree, portMovedNote } from '../../src/cli/service-ports.js';

const held: Server[] = [];
afterEach(async () => {
  await Promise.all(held.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A port this test holds, as another process would. */
async function takenPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  held.push(server);
  return (server.address() as { port: number }).port;
}

/** A port nothing listens on (held a moment, then let go). */
async function freedPort(): Promise<number> {
  const port = await takenPort();
  await new Promise((resolve) => held.pop()!.close(resolve));
  return port;
}

describe('the ports of dev --distributed', () => {
  it('refuses a given port another process holds, naming its option', async () => {
    const taken = await takenPort();
    expect(await portFree(taken)).toBe(false);
    await expect(choosePorts({ postgres: taken }, {})).rejects.toThrow(`PostgreSQL's port ${taken} (--postgres-port) is in use by another process on 127.0.0.1`);
    await expect(choosePorts({ minio: taken }, {})).rejects.toThrow(`MinIO's port ${taken} (--minio-port) is in use`);
  });

  it("keeps the last start's ports when they are free, and gives up one that is taken for a free one, saying so", async () => {
    const free = await freedPort();
    const taken = await takenPort();
    expect(await choosePorts({}, { postgres: free, minio: taken })).toEqual({ ports: { postgres: free }, taken: { minio: taken } });
    // A given port wins over the remembered one.
    const given = await freedPort();
    expect((await choosePorts({ minio: given }, { minio: taken })).ports).toEqual({ minio: given });
    expect(portMovedNote('minio', taken, 40123, '/data/distributed/env.sh')).toBe(
      `dev: MinIO's port of the last start, ${taken}, is in use by another process; MinIO runs on 40123 instead: a shell that sourced /data/distributed/env.sh must source it again (or give --minio-port)`,
    );
  });
});
