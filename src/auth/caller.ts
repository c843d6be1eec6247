// Who is asking: a token's subject, or the user behind an API key. `by` names it in audit lines
// (`jwt:<sub>` or `key:<kg_…>`); `level` bounds the keys it may act on. A key caller also says which
// key it is, whether it is retiring (rotated, in its grace period: it may no longer create, rotate or
// update keys) and whether it is constrained (it has its own rate limit or credits: it may not act on
// other keys, so its holder cannot mint an unlimited one).
export type Caller = {
  userId: number;
  level: number;
  by: string;
  key?: { id: string; retiring: boolean; constrained: boolean };
};
