// Deployable enqueue function (Lambda): HTTP API with bearer SKIPLOCK_ENQUEUE_TOKEN, or direct invoke.

import { createLambdaEnqueue } from 'skiplock/lambda';
import { jobs } from './jobs.js';

export const handler = createLambdaEnqueue(jobs);
