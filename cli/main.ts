#!/usr/bin/env node
// The `skiplock` command. `skiplock --help` lists the commands.
import { runCli } from './run.js';

process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(text.endsWith('\n') || text.startsWith('\r') ? text : `${text}\n`),
  tty: process.stderr.isTTY === true,
});
