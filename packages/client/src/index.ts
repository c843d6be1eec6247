// @keygate/client: the typed client of keygate's HTTP API, and the types the middleware share.
export { type CallOptions, createClient, type KeygateClient, KeygateError } from './client';
export { type Decision, decide, type Outcome, type Principal, type VerifyAnswer } from './decision';
export type { KeygateOptions } from './guard';
export type { components, operations, paths } from './openapi';
