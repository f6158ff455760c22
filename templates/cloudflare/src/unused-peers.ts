// Stands in for optional peers of skiplock that only its Vercel and Lambda paths load
// (@vercel/functions, @aws-sdk/client-secrets-manager), through wrangler.jsonc's "alias": a Worker
// never loads them, but wrangler's esbuild resolves every import() it finds and fails on a package
// the app does not install.
export {};
