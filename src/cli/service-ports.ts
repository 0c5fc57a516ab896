/**
 * The ports `harvester dev --distributed` starts PostgreSQL and MinIO on. A port given on the
 * command line is the user's: taken by another process, it is refused with a message saying so.
 * The last start's port (remembered so the environment file stays right across restarts) is only
 * a wish: taken, a free one is chosen, and a note says which, and that the environment changed.
 */
import { createServer } from 'node:net';

export type ServiceName = 'postgres' | 'minio';
export type ServicePorts = Partial<Record<ServiceName, number>>;

const LABEL: Record<ServiceName, { name: string; option: string }> = {
  postgres: { name: 'PostgreSQL', option: '--postgres-port' },
  minio: { name: 'MinIO', option: '--minio-port' },
};

/** Whether this process can listen on 127.0.0.1:`port` (nothing else does). */
export async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * The ports to start on (a service left out gets a free one), and the remembered ones that were
 * taken. Throws, naming the option, when a given port is taken.
 */
export async function choosePorts(given: ServicePorts, last: ServicePorts): Promise<{ ports: ServicePorts; taken: ServicePorts }> {
  const ports: ServicePorts = {};
  const taken: ServicePorts = {};
  for (const service of ['postgres', 'minio'] as const) {
    const wanted = given[service];
    if (wanted !== undefined) {
      if (!(await portFree(wanted))) {
        const { name, option } = LABEL[service];
        throw new Error(`${name}'s port ${wanted} (${option}) is in use by another process on 127.0.0.1: give another, or leave ${option} out for the last start's port or a free one`);
      }
      ports[service] = wanted;
      continue;
    }
    const remembered = last[service];
    if (remembered === undefined) continue;
    if (await portFree(remembered)) ports[service] = remembered;
    else taken[service] = remembered;
  }
  return { ports, taken };
}

/** What `dev` says of a remembered port that was taken, once the service runs on `now`. */
export function portMovedNote(service: ServiceName, was: number, now: number, envFile: string): string {
  const { name, option } = LABEL[service];
  return `dev: ${name}'s port of the last start, ${was}, is in use by another process; ${name} runs on ${now} instead: a shell that sourced ${envFile} must source it again (or give ${option})`;
}
