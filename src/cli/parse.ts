// argv → the command, its settings, its own flags and its one argument, if it takes one. Flags are read
// by node:util's parseArgs, strictly, per command.
import { parseArgs } from 'node:util';
import { flagOf, SETTINGS, type SettingName, settingOfFlag } from '../config';
import { COMMAND_NAMES, COMMANDS, type Command } from './commands';
import { UsageError } from './errors';

export type Parsed =
  | {
      command: Command;
      settings: Partial<Record<SettingName, string>>;
      options: Record<string, string>;
      argument: string | undefined;
    }
  | { help: Command | undefined }
  | { version: true };

export function parseCommandLine(argv: string[]): Parsed {
  const first = argv[0];
  if (first === 'help') return { help: commandNamed(argv[1]) };
  const named = first !== undefined && !first.startsWith('-');
  const command = named ? commandNamed(first) : 'serve';
  if (command === undefined) {
    throw new UsageError(
      `unknown command "${first}"; the commands are ${COMMAND_NAMES.join(', ')} (see keygate --help).`,
    );
  }
  const spec = COMMANDS[command];
  const settingOptions = Object.fromEntries(
    (Object.keys(SETTINGS) as SettingName[]).map((name) => [
      flagOf(name).slice(2),
      { type: 'string' as const },
    ]),
  );
  const commandOptions = Object.fromEntries(
    Object.entries(spec.options ?? {}).map(([name, option]) => [
      name,
      { type: option.boolean ? ('boolean' as const) : ('string' as const) },
    ]),
  );
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: named ? argv.slice(1) : argv,
      options: {
        ...settingOptions,
        ...commandOptions,
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      strict: true,
      allowPositionals: true,
    }));
  } catch (error) {
    throw new UsageError(describeParseError(error, command));
  }
  if (values.help) return { help: named ? command : undefined };
  if (values.version) return { version: true };
  const argument = spec.argument === undefined ? undefined : positionals.shift();
  if (spec.argument !== undefined && argument === undefined) {
    throw new UsageError(`keygate ${command} needs ${spec.argument} (see keygate ${command} --help).`);
  }
  if (positionals.length > 0) {
    const extra = positionals[0] as string;
    throw new UsageError(
      COMMAND_NAMES.includes(extra as Command)
        ? `one command at a time: "${extra}" after "keygate ${command}" is not a flag (see keygate ${command} --help).`
        : spec.argument === undefined
          ? `keygate ${command} takes no arguments, only flags; got "${extra}" (see keygate ${command} --help).`
          : `keygate ${command} takes one ${spec.argument}; got "${extra}" as well (see keygate ${command} --help).`,
    );
  }
  const settings: Partial<Record<SettingName, string>> = {};
  const options: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) {
    // A command's own switch (console-link's --operator) is present or not.
    if (value === true && spec.options?.[name]?.boolean) options[name] = 'true';
    if (typeof value !== 'string') continue;
    const setting = settingOfFlag(`--${name}`);
    if (setting) settings[setting] = value;
    else options[name] = value;
  }
  return { command, settings, options, argument };
}

function commandNamed(name: string | undefined): Command | undefined {
  return COMMAND_NAMES.find((command) => command === name);
}

/** node:util's messages, in keygate's words and naming the flag. */
function describeParseError(error: unknown, command: Command): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: string }).code;
  const flag = /'(-[^' ]+)/.exec(message)?.[1] ?? 'a flag';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    return `unknown flag ${flag} for keygate ${command} (see keygate ${command} --help).`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    return `${flag} needs a value, as in ${flag} VALUE or ${flag}=VALUE.`;
  }
  return `${message.split('\n')[0]} (see keygate ${command} --help).`;
}
