// The logger's JSON: a request line's repeated strings written once, the same bytes as JSON.stringify.
import { describe, expect, it } from 'bun:test';
import { createLogger, jsonStringOf } from '../../src/core/log';

describe('jsonStringOf', () => {
  it('gives JSON.stringify of each string, repeated, changed or back again', () => {
    const json = jsonStringOf();
    const texts = [
      '/apikeys/verify',
      '/apikeys/verify',
      'GET',
      'a "quoted" \\ path\n',
      '',
      '/apikeys/verify',
      'é\u2028',
    ];
    for (const text of texts) expect(json(text)).toBe(JSON.stringify(text));
    // Equal text in another string object is the same answer.
    expect(json(['/apikeys/', 'verify'].join(''))).toBe('"/apikeys/verify"');
  });
});

describe('infoJson', () => {
  it('writes each line as JSON.stringify would, whatever the message before it', () => {
    let written = '';
    const logger = createLogger('info', (chunk) => {
      written += chunk;
    });
    for (const msg of ['request', 'request', 'a "new" one', 'request']) logger.infoJson(msg, '"status":200');
    logger.flush();
    const lines = written
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines.map((line) => [line.msg, line.status, line.level])).toEqual([
      ['request', 200, 'info'],
      ['request', 200, 'info'],
      ['a "new" one', 200, 'info'],
      ['request', 200, 'info'],
    ]);
  });
});
