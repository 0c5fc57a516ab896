/**
 * A real HTTPS webhook receiver for tests, on the development certificate that `npm run setup`
 * makes, verifying every delivery with the `standardwebhooks` package.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { TOOLS_DIR } from '../../src/project-paths.js';

export const DEV_CA_FILE = join(TOOLS_DIR, 'certs', 'ca.pem');
export const DEV_CERT_FILE = join(TOOLS_DIR, 'certs', 'localhost.pem');
export const DEV_KEY_FILE = join(TOOLS_DIR, 'certs', 'localhost-key.pem');

export interface ReceivedDelivery {
  headers: Record<string, string>;
  body: string;
  verified: boolean;
  payload?: { type: string; timestamp: string; data: Record<string, unknown> };
}

export interface TestReceiver {
  url: string;
  deliveries: ReceivedDelivery[];
  /** Status to answer the next deliveries with, first to last; 200 once exhausted. */
  answers: number[];
  secret: string | undefined;
  close(): Promise<void>;
}

export async function startHttpsReceiver(): Promise<TestReceiver> {
  const receiver: TestReceiver = { url: '', deliveries: [], answers: [], secret: undefined, close: async () => undefined };
  const server: Server = createServer({ cert: readFileSync(DEV_CERT_FILE), key: readFileSync(DEV_KEY_FILE) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = req.headers as Record<string, string>;
      const delivery: ReceivedDelivery = { headers, body, verified: false };
      if (receiver.secret) {
        try {
          delivery.payload = new Webhook(receiver.secret).verify(body, headers) as ReceivedDelivery['payload'];
          delivery.verified = true;
        } catch {
          delivery.verified = false;
        }
      }
      receiver.deliveries.push(delivery);
      res.writeHead(receiver.answers.shift() ?? 200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `https://localhost:${(server.address() as AddressInfo).port}/hooks`;
  receiver.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return receiver;
}

export function devCa(): Buffer {
  return readFileSync(DEV_CA_FILE);
}
