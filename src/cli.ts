#!/usr/bin/env bun
// The one entry point, compiled into the binary and run from source: the commands live in cli/.
import { main } from './cli/main';

main(process.argv.slice(2));
