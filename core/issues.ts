import type { z } from 'zod';

/** zod issues as `path: message` pairs, for one readable error message. */
export function issuesOf(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

export function describeIssues(error: z.ZodError, root = 'payload'): string {
  return issuesOf(error)
    .map((i) => `${i.path || root}: ${i.message}`)
    .join('; ');
}
