// Deployable enqueue function (Lambda): HTTP API with bearer SKIPLOCK_ENQUEUE_TOKEN, or direct invoke.
import { jobs } from './app-jobs.js';
import { createLambdaEnqueue } from './lambda.js';

export const handler = createLambdaEnqueue(jobs);
