// Deployable replay function (Lambda): invoke-only, authorized by IAM.

import { createLambdaReplay } from 'skiplock/lambda';
import { jobs } from './jobs.js';

export const handler = createLambdaReplay(jobs);
