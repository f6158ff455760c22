// In base/ because each layer reports errors that may quote a connection string: db/ (driver
// errors), the worker (an invocation's failure), the CLI (a jobs module that fails to load).

/** Removes credentials from a message: URL passwords, password= pairs, whole connection strings. */
export function scrubSecrets(message: string): string {
  return message
    .replace(/\b(postgres(?:ql)?:\/\/)[^\s'"]*/gi, '$1***')
    .replace(/(password\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/gi, '$1***');
}
