// `keygate config`: every setting's effective value and where it came from, secrets masked.
import { existsSync } from 'node:fs';
import { type Config, SETTINGS, type SettingName } from '../config';
import { generatedSecretPath } from '../jwt-secret';
import { databaseShown } from './database';

/** `keygate config`: every setting's effective value and its source; secrets are never printed. */
export function effectiveSettings(config: Config, flags: Partial<Record<SettingName, string>>): string {
  const given = (name: string) => flags[name as SettingName] ?? (process.env[name] || undefined);
  const rows = (Object.keys(SETTINGS) as SettingName[]).map((name) => {
    // A setting read from the file its <NAME>_FILE twin names is credited to that twin.
    const twin = `${name}_FILE`;
    const source =
      flags[name] !== undefined
        ? 'flag'
        : process.env[name]
          ? 'environment'
          : twin in SETTINGS && given(twin) !== undefined
            ? `read from ${twin}`
            : 'default';
    const key = name.toLowerCase().replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
    // A *_FILE setting is a path, shown as given; the value read from it is shown (masked) on its twin.
    const value = name.endsWith('_FILE')
      ? given(name)
      : name === 'DATABASE_URL'
        ? databaseShown(config.database)
        : (config as Record<string, unknown>)[key];
    return { setting: `${name}=${shownValue(name, value, config)}`, source };
  });
  const width = Math.max(...rows.map((row) => row.setting.length));
  return rows.map((row) => `${row.setting.padEnd(width)}  (${row.source})`).join('\n');
}

function shownValue(name: SettingName, value: unknown, config: Config): string {
  if (name === 'JWT_SECRET') {
    if (typeof value === 'string') return `<set, ${Buffer.byteLength(value)} bytes, not shown>`;
    if (config.jwtKeySource !== 'secret') {
      return `<unset: tokens are checked with ${config.jwtKeySource === 'jwks' ? 'JWT_JWKS_URL' : 'JWT_PUBLIC_KEY'}>`;
    }
    const file = generatedSecretPath(config.database);
    if (file === undefined) return '<unset: required with PostgreSQL; set JWT_SECRET or JWT_SECRET_FILE>';
    return `<unset: the server uses ${file}${existsSync(file) ? '' : ', not created yet'}>`;
  }
  if (/SECRET|PASSWORD|TOKEN/.test(name) && !name.endsWith('_FILE') && value !== undefined) {
    return '<set, not shown>';
  }
  return value === undefined ? '' : String(value);
}
