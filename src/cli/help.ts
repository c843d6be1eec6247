// --help (keygate's or a command's) and --version.
import { flagOf, SETTINGS, type SettingName, type SettingSpec } from '../config';
import { COMMIT, TAGLINE, VERSION } from '../version';
import { COMMAND_NAMES, COMMANDS, type Command } from './commands';

/**
 * Each setting on two lines: its name, flag and default, then what it is for, indented. One line each
 * ran the columns together for the longest names and left no room for the text.
 */
function settingsHelp(names: readonly SettingName[] = Object.keys(SETTINGS) as SettingName[]): string {
  return names
    .map((name) => {
      const { default: fallback, help, defaultMeans }: SettingSpec = SETTINGS[name];
      const shown = fallback === undefined ? 'unset' : fallback === '' ? 'empty' : fallback;
      const means = defaultMeans === undefined ? '' : `, ${defaultMeans}`;
      return `  ${name}, ${flagOf(name)}  (default: ${shown}${means})\n      ${help}`;
    })
    .join('\n');
}

export function globalHelp(): string {
  return `keygate ${VERSION} — ${TAGLINE}

Usage: keygate [command] [flags]

Commands:
${COMMAND_NAMES.map((name) => `  ${name.padEnd(13)}${COMMANDS[name].summary}`).join('\n')}

Settings (environment variable, or the flag beside it; a flag wins):
${settingsHelp()}

  keygate COMMAND --help   a command's flags, defaults and examples
  keygate --version        version, commit and Bun version`;
}

export function commandHelp(command: Command): string {
  const spec = COMMANDS[command];
  const options = Object.entries(spec.options ?? {}).map(
    ([name, option]) =>
      `  --${name.padEnd(22)}${option.help}${option.default === undefined ? '' : ` (default: ${option.default})`}`,
  );
  return `keygate ${command}: ${spec.summary}

Usage: ${spec.usage}
${options.length > 0 ? `\nFlags:\n${options.join('\n')}\n` : ''}
Settings it reads (environment variable, or the flag beside it; a flag wins):
${settingsHelp(spec.settings)}${spec.settings === undefined ? '' : '\n\n  (the other settings do not apply here; keygate --help lists them all)'}

Examples:
${spec.examples.map((example) => `  ${example}`).join('\n')}`;
}

export function versionLine(): string {
  return `keygate ${VERSION} (commit ${COMMIT}, bun ${Bun.version})`;
}
