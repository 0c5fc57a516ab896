import { createServer } from 'node:net';

/** A free TCP port on loopback: for the demo, which must not clash with a running `harvester dev`, and for the shared services. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
