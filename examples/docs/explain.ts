// "Why isn't my job running?" (docs/operations.md#why-isnt-my-job-running).
import { connect } from 'skiplock';
import { jobs } from './jobs.js';

const db = connect({ connectionString: process.env.DATABASE_URL! });

// #region explain
import { explain } from 'skiplock';

// Pass your kinds: the limits, rates and run windows their code declares are checked too.
const why = await explain(db, '1234', { jobs });
if (why?.ready) console.log(`ready; ${why.readyAhead} ready job(s) ahead of it`);
for (const hold of why?.holds ?? []) console.log(hold.reason, hold.message, hold.until);
// e.g. concurrency_limit "queue webhooks is at its concurrency limit: 10 running of 10" null
// #endregion explain
