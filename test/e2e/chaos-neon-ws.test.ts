import { describeDriverRun } from '../helpers/chaos.js';

// The CI-sized chaos run on Neon's WebSocket Pool, through the WebSocket proxy of skiplock/testing
// with its faults on: sockets closed mid-transaction and left half-open, frames delayed, answers lost
// after COMMIT or slowed by seconds — beside the kills, the throwing and hanging handlers and the
// duplicate ticks of every run.
describeDriverRun('neon-ws', ['flow', 'keyed-many', 'keyed-one', 'transaction']);
