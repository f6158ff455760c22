import { describeDriverRun } from '../helpers/chaos.js';

// The CI-sized chaos run on Neon's HTTP driver, through the SQL-over-HTTP endpoint of
// skiplock/testing with its faults on: requests refused (5xx) or dropped before they run, answers lost
// after COMMIT, answers slowed by seconds, requests never answered, and a compute that sleeps now and
// then and refuses everything — beside the kills, the throwing and hanging handlers and the duplicate
// ticks of every run. Its stepped jobs' steps are all plain: neon-http has no interactive transactions.
describeDriverRun('neon-http', ['batch', 'flow', 'keyed-many', 'keyed-one']);
