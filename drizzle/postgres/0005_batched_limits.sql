-- Written by hand (drizzle-kit generate --custom): functions only. A replica sends the rate-limit
-- decisions and the credit takes that arrive in the same turn of its event loop as ONE call each
-- (src/db/postgres/limits-batch.ts): one round trip and, for credits, one commit (one WAL flush) for
-- the whole batch, instead of one per verification.
--
-- Several decisions of keygate_rate_limit in one transaction, decided in the order given, each
-- seeing the ones before it (two decisions of one key in a batch count twice). `p_decisions` names,
-- for each counter, its decision: 1, 1, 2, 3, 3, … (a decision's counters are consecutive, the
-- decisions numbered from 1 in order); `p_now` is each decision's clock for tests (NULL: the
-- database's clock). As for one decision, a refusal takes no lock: every decision is first checked
-- without locks, and one refused there is answered from that read. The counters of the others are
-- then locked together, in counter order, as one decision locks its own, so batches of several
-- replicas sharing counters cannot deadlock. Returns keygate_rate_limit's rows, each with its decision.
CREATE FUNCTION "keygate_rate_limit_batch"(
	p_decisions integer[], p_counters text[], p_limits integer[], p_durations_ms bigint[], p_now bigint[] DEFAULT NULL
) RETURNS TABLE (
	"decision" integer, "counter" text, "allowed" boolean, "now_ms" bigint, "remaining" integer,
	"reset_ms" bigint, "next_ms" bigint, "epoch" bigint
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_n integer := cardinality(p_counters);
	v_first integer := 1;
	v_last integer;
	v_decision integer;
	v_starts integer[] := '{}';
	v_ends integer[] := '{}';
	v_refused boolean[] := '{}';
	v_lock record;
	v_check record;
	-- The refused decisions' answers, as the read without locks gave them.
	r_decision integer[] := '{}';
	r_counter text[] := '{}';
	r_now bigint[] := '{}';
	r_remaining integer[] := '{}';
	r_reset bigint[] := '{}';
	r_next bigint[] := '{}';
BEGIN
	WHILE v_first <= v_n LOOP
		v_decision := p_decisions[v_first];
		v_last := v_first;
		WHILE v_last < v_n AND p_decisions[v_last + 1] = v_decision LOOP
			v_last := v_last + 1;
		END LOOP;
		v_starts := v_starts || v_first;
		v_ends := v_ends || v_last;
		v_first := v_last + 1;
	END LOOP;
	FOR d IN 1 .. cardinality(v_starts) LOOP
		v_refused := v_refused || false;
		FOR v_check IN SELECT * FROM "keygate_rate_limit"(
			p_counters[v_starts[d]:v_ends[d]], p_limits[v_starts[d]:v_ends[d]],
			p_durations_ms[v_starts[d]:v_ends[d]], false, p_now[d]
		) LOOP
			IF NOT v_check."allowed" THEN
				v_refused[d] := true;
			END IF;
			r_decision := r_decision || d;
			r_counter := r_counter || v_check."counter";
			r_now := r_now || v_check."now_ms";
			r_remaining := r_remaining || v_check."remaining";
			r_reset := r_reset || v_check."reset_ms";
			r_next := r_next || v_check."next_ms";
		END LOOP;
	END LOOP;
	FOR v_lock IN
		SELECT DISTINCT ON (u.c) u.c, u.l, u.d
		FROM unnest(p_counters, p_limits, p_durations_ms, p_decisions) AS u(c, l, d, k)
		WHERE NOT v_refused[u.k] ORDER BY u.c
	LOOP
		PERFORM 1 FROM "rate_limit_windows" w WHERE w."counter" = v_lock.c FOR UPDATE;
		IF NOT FOUND THEN
			INSERT INTO "rate_limit_windows" AS w ("counter", "limit", "duration_ms", "epochs", "counts", "latest", "idle_at")
				VALUES (v_lock.c, v_lock.l, v_lock.d, '{}', '{}', '{}', 0)
				ON CONFLICT ("counter") DO UPDATE SET "limit" = w."limit";
		END IF;
	END LOOP;
	FOR d IN 1 .. cardinality(v_starts) LOOP
		IF v_refused[d] THEN
			RETURN QUERY SELECT d, r.c, false, r.n, r.m, r.s, r.x, NULL::bigint
				FROM unnest(r_decision, r_counter, r_now, r_remaining, r_reset, r_next) WITH ORDINALITY AS r(k, c, n, m, s, x, o)
				WHERE r.k = d ORDER BY r.o;
		ELSE
			RETURN QUERY SELECT d, r.* FROM "keygate_rate_limit"(
				p_counters[v_starts[d]:v_ends[d]], p_limits[v_starts[d]:v_ends[d]],
				p_durations_ms[v_starts[d]:v_ends[d]], true, p_now[d]
			) AS r;
		END IF;
	END LOOP;
END
$$;
--> statement-breakpoint
-- Several guarded takes of credits in one transaction, in the order given, each seeing the ones
-- before it (two takes of one pool in a batch spend twice; a pool that runs out midway refuses the
-- rest). The same rule as the one statement of src/db/credits-take.ts: a due refill sets `remaining`
-- to `refill_amount` in the write that takes `cost`, and nothing is written unless the credits at
-- that moment cover `cost`. The pools are locked first, in lineage order: batches of several
-- replicas cannot deadlock. One row per take: `taken`, and the pool after the take (taken) or as it
-- stands (refused); every column NULL when the lineage has no credits.
CREATE FUNCTION "keygate_take_credits"(p_lineages text[], p_costs integer[], p_now bigint[])
RETURNS TABLE (
	"taken" boolean, "remaining" bigint, "refill_amount" bigint, "refill_interval_ms" bigint, "refilled_at" bigint
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_lineage text;
	v_cost bigint;
	v_now bigint;
BEGIN
	PERFORM 1 FROM "key_credits" c WHERE c."lineage" = ANY(p_lineages) ORDER BY c."lineage" FOR UPDATE;
	FOR i IN 1 .. cardinality(p_lineages) LOOP
		v_lineage := p_lineages[i];
		v_cost := p_costs[i];
		v_now := p_now[i];
		"taken" := true;
		UPDATE "key_credits" c SET
			"remaining" = CASE WHEN c."refill_interval_ms" IS NOT NULL AND c."refill_amount" IS NOT NULL
					AND v_now >= c."refilled_at" + c."refill_interval_ms"
				THEN c."refill_amount" - v_cost ELSE c."remaining" - v_cost END,
			"refilled_at" = CASE WHEN c."refill_interval_ms" IS NOT NULL AND c."refill_amount" IS NOT NULL
					AND v_now >= c."refilled_at" + c."refill_interval_ms"
				THEN c."refilled_at" + ((v_now - c."refilled_at") / c."refill_interval_ms") * c."refill_interval_ms"
				ELSE c."refilled_at" END
			WHERE c."lineage" = v_lineage AND c."remaining" IS NOT NULL
				AND (CASE WHEN c."refill_interval_ms" IS NOT NULL AND c."refill_amount" IS NOT NULL
					AND v_now >= c."refilled_at" + c."refill_interval_ms"
					THEN c."refill_amount" ELSE c."remaining" END) >= v_cost
			RETURNING c."remaining", c."refill_amount", c."refill_interval_ms", c."refilled_at"
			INTO "remaining", "refill_amount", "refill_interval_ms", "refilled_at";
		IF NOT FOUND THEN
			"taken" := false;
			SELECT c."remaining", c."refill_amount", c."refill_interval_ms", c."refilled_at"
				INTO "remaining", "refill_amount", "refill_interval_ms", "refilled_at"
				FROM "key_credits" c WHERE c."lineage" = v_lineage;
			IF NOT FOUND THEN
				"taken" := NULL;
				"remaining" := NULL;
				"refill_amount" := NULL;
				"refill_interval_ms" := NULL;
				"refilled_at" := NULL;
			END IF;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
