import { request, type Dispatcher } from 'undici';
import { header } from './answers.js';
import { MediaExpiredError, NetworkError, ServerError, SocialApiError } from './errors.js';
import { withRetries, type RetryPolicy } from './retry.js';

/**
 * A media file from a download's `media_url`, a link that lives at most an hour: its bytes and
 * type. Not a billed call, and not the API's origin in general (a CDN's), so not through the
 * API's pool or rate gate. Transient failures (network, 5xx, 429) are tried again by the API
 * calls' retry policy, within the deadline. The link is never put in an error: it is a
 * credential while it lives.
 */
export async function fetchMedia(url: string, retry: RetryPolicy, options: { deadlineMs?: number } = {}): Promise<{ bytes: Buffer; contentType: string }> {
  const deadline = AbortSignal.timeout(options.deadlineMs ?? 60_000);
  return withRetries(async () => {
    let answer: Dispatcher.ResponseData;
    try {
      answer = await request(url, { method: 'GET', signal: deadline });
    } catch (error) {
      const code = (error as { code?: string }).code ?? 'network_error';
      throw new NetworkError(`the media link could not be fetched: ${code}`, { code: 'network_error', cause: error });
    }
    if (answer.statusCode >= 400) {
      await answer.body.dump();
      const message = `the media link answered ${answer.statusCode}`;
      if (answer.statusCode === 410) throw new MediaExpiredError(`${message}: it has expired`, { status: 410, code: 'media_expired' });
      if (answer.statusCode >= 500 || answer.statusCode === 429) throw new ServerError(message, { status: answer.statusCode, code: 'media_unavailable' });
      throw new SocialApiError(message, { status: answer.statusCode, code: 'media_unavailable' });
    }
    const contentType = header(answer.headers, 'content-type') ?? 'application/octet-stream';
    return { bytes: Buffer.from(await answer.body.arrayBuffer()), contentType };
  }, retry);
}
