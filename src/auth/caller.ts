// Who is asking: a token's subject, or the user behind an API key. `by` names it in audit lines
// (`jwt:<sub>` or `key:<kg_…>`); `level` bounds the keys it may act on; `retiring` is a key in its
// grace period after a rotation, which still authenticates but may no longer create or rotate keys.
export type Caller = { userId: number; level: number; by: string; retiring: boolean };
