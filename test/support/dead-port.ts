import { readFileSync } from 'node:fs';
import { connect } from 'node:net';

/**
 * A loopback port where a connection is refused, and stays refused while the suite runs: one below
 * the kernel's ephemeral range (ip_local_port_range), which no `listen(0)` of the tests running beside
 * is given. A port from `freePort()` is let go and can be taken by a parallel test's server before the
 * test uses it: a command then met a listener there, not the refusal the test expected.
 */
export async function deadPort(): Promise<number> {
  const lowest = ephemeralRangeStart();
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * Math.max(1, lowest - 20_000));
    if (await refused(port)) return port;
  }
  throw new Error(`no refusing port found between 20000 and ${lowest}`);
}

function ephemeralRangeStart(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low !== undefined && Number.isInteger(low) && low > 20_100) return low;
  } catch {
    // Not Linux: its usual start of the range.
  }
  return 32_768;
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}
