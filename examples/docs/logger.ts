// Plugging a logger into the worker. pino takes (fields, message); skiplock calls (message, fields).
import { connect, createWorker } from 'skiplock';
import { jobs } from './jobs.js';

/** The part of a pino logger used here (`import pino from 'pino'; const pinoLogger = pino()`). */
interface PinoLike {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}
declare const pinoLogger: PinoLike;
const db = connect({ connectionString: process.env.DATABASE_URL! });

// #region logger
import type { Logger } from 'skiplock';

const logger: Logger = {
  debug: (message, fields) => pinoLogger.debug(fields ?? {}, message),
  info: (message, fields) => pinoLogger.info(fields ?? {}, message),
  warn: (message, fields) => pinoLogger.warn(fields ?? {}, message),
  error: (message, fields) => pinoLogger.error(fields ?? {}, message),
};
const worker = createWorker({ db, jobs, logger });

// #endregion logger
export { worker };
