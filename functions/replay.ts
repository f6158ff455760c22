// Deployable replay function (Lambda): invoke-only, authorized by IAM.
import { jobs } from './app-jobs.js';
import { createLambdaReplay } from './lambda.js';

export const handler = createLambdaReplay(jobs);
