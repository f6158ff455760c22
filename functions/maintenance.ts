// Deployable maintenance function (Lambda, scheduled): deadlines, retention, stats.
import { createLambdaMaintenance } from 'skiplock/lambda';

export const handler = createLambdaMaintenance();
