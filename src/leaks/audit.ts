// The audit line of a leak found: `apikey.leaked` with the key, its user, the report's source and
// url, what the key got, who reported it and the request. Never the secret.
import type { Logger } from '../core/log';
import type { OnLeak } from './service';

export function leakAuditLine(logger: Pick<Logger, 'info'>): OnLeak {
  return ({ key, userId, source, url, action, by, requestId }) =>
    logger.info('apikey.leaked', { key, userId, source, url, action, by, requestId });
}
