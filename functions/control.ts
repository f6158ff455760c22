// Deployable control function (Lambda): pause, resume and list queues and kinds.
// Direct invoke (IAM), or POST /control with Authorization: Bearer $SKIPLOCK_ADMIN_TOKEN.

import { createLambdaControl } from 'skiplock/lambda';

export const handler = createLambdaControl();
