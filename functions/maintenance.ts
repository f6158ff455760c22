// Deployable maintenance function (Lambda, scheduled): deadlines, retention, stats.
import { createLambdaMaintenance } from './lambda.js';

export const handler = createLambdaMaintenance();
