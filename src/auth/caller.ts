// Who is asking: a token's subject, or the user behind an API key, or the operator acting for a user.
// `by` names it in audit lines (`jwt:<sub>`, `key:<kg_…>` or `admin:<sub>`); `level` bounds the keys it
// may act on. A key caller also says which key it is, whether it is retiring (rotated, in its grace
// period: it may no longer create, rotate or update keys), whether it is constrained (it has its own
// rate limit, credits or allowed addresses: it may not act on other keys, so its holder cannot mint an
// unlimited one), and the permissions it holds (all it may grant).
export type Caller = {
  userId: number;
  level: number;
  by: string;
  key?: { id: string; retiring: boolean; constrained: boolean; permissions: readonly string[] | undefined };
  /** The operator (/admin): it may grant any permission, whatever the user's policy says. */
  operator?: true;
};
