/**
 * Why a connection to Temporal failed, in a few words: what the TCP probe of its gRPC address
 * (connection.ts) and the run's start over its HTTP API (run-start.ts) both say. Apart from both,
 * so the start reads it without Temporal's client.
 */
export function socketErrorReason(error: NodeJS.ErrnoException, host: string): string {
  if (error.code === 'ECONNREFUSED') return 'connection refused';
  if (error.code === 'ENOTFOUND') return `unknown host ${host}`;
  return error.code ?? error.message;
}
