#!/usr/bin/env node
// The `skiplock` command. `skiplock --help` lists the commands.
import { createInterface } from 'node:readline/promises';
import { runCli } from './run.js';

/** Asks on the terminal until one of `choices` (or the first, on an empty answer) is given. */
async function ask(question: string, choices: readonly string[]): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    while (true) {
      const answer = (await rl.question(`${question} [${choices.join('/')}] (${choices[0]}) `)).trim().toLowerCase();
      if (answer === '') return choices[0] as string;
      if (choices.includes(answer)) return answer;
    }
  } finally {
    rl.close();
  }
}

process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(text.endsWith('\n') || text.startsWith('\r') ? text : `${text}\n`),
  tty: process.stderr.isTTY === true,
  ask: process.stdin.isTTY === true && process.stdout.isTTY === true ? ask : undefined,
});
