-- Written by hand (drizzle-kit generate --custom): functions only. A replica sends the rate-limit
-- decisions and the credit takes that arrive in the same turn of its event loop as ONE call each
-- (src/db/postgres/rate-limits.ts, credits-batch.ts): one round trip and, for credits, one commit
-- (one WAL flush) for the whole batch, instead of one per verification.
--
-- Several decisions of keygate_rate_limit in one transaction, decided in the order given, each
-- seeing the ones before it (two decisions of one key in a batch count twice), by the same rule and
-- with the same answers, in a few statements for the whole batch instead of a dozen per decision.
-- `p_decisions` names, for each counter, its decision: 1, 1, 2, 3, 3, … (a decision's counters are
-- consecutive, the decisions numbered from 1 in order); `p_now` is each decision's clock for tests
-- (NULL: the database's). As for one decision, a refusal takes no lock: every decision is first
-- judged from one read without locks, and one refused there is answered from it (a window full then
-- is full now: counts only grow and times only advance under the locks). The counters of the others
-- are then locked one by one in counter order, a missing one created in its turn, as one decision
-- locks its own, so batches of several replicas sharing counters cannot deadlock; read again under
-- the locks, decided in order in memory, and written once each. Returns keygate_rate_limit's rows,
-- each with its decision.
CREATE FUNCTION "keygate_rate_limit_batch"(
	p_decisions integer[], p_counters text[], p_limits integer[], p_durations_ms bigint[], p_now bigint[] DEFAULT NULL
) RETURNS TABLE (
	"decision" integer, "counter" text, "allowed" boolean, "now_ms" bigint, "remaining" integer,
	"reset_ms" bigint, "next_ms" bigint, "epoch" bigint
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_n integer := cardinality(p_counters);
	v_m integer := coalesce(p_decisions[cardinality(p_counters)], 0);
	v_starts integer[];
	v_ends integer[];
	v_clock bigint;
	v_now bigint;
	v_refused boolean[];
	v_states "rate_limit_windows"[];
	v_previous integer[];
	v_changed boolean[];
	v_row "rate_limit_windows";
	v_lock record;
	v_allowed boolean;
	v_live boolean;
	v_limit integer;
	v_duration bigint;
	v_used integer;
	v_epoch bigint;
	v_epochs bigint[];
	v_counts integer[];
	v_latest bigint[];
	v_k integer;
	v_excess integer;
	v_next bigint;
	-- The answers, by counter position.
	o_allowed boolean[];
	o_now bigint[];
	o_remaining integer[];
	o_reset bigint[];
	o_next bigint[];
	o_epoch bigint[];
BEGIN
	IF v_n = 0 THEN RETURN; END IF;
	v_starts := array_fill(0, ARRAY[v_m]);
	v_ends := array_fill(0, ARRAY[v_m]);
	FOR i IN REVERSE v_n .. 1 LOOP
		v_starts[p_decisions[i]] := i;
	END LOOP;
	FOR i IN 1 .. v_n LOOP
		v_ends[p_decisions[i]] := i;
	END LOOP;
	v_refused := array_fill(false, ARRAY[v_m]);
	o_allowed := array_fill(NULL::boolean, ARRAY[v_n]);
	o_now := array_fill(NULL::bigint, ARRAY[v_n]);
	o_remaining := array_fill(NULL::integer, ARRAY[v_n]);
	o_reset := array_fill(NULL::bigint, ARRAY[v_n]);
	o_next := array_fill(NULL::bigint, ARRAY[v_n]);
	o_epoch := array_fill(NULL::bigint, ARRAY[v_n]);
	FOR v_pass IN 1 .. 2 LOOP
		IF v_pass = 2 THEN
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
		END IF;
		-- Each counter position's row (NULL when missing) and the position before it with the same
		-- counter, whose state after its decision is this position's state before.
		SELECT array_agg(a.w ORDER BY a.o), array_agg(a.p ORDER BY a.o) INTO v_states, v_previous FROM (
			SELECT u.o, w, lag(u.o) OVER (PARTITION BY u.c ORDER BY u.o) AS p
			FROM unnest(p_counters) WITH ORDINALITY AS u(c, o)
			LEFT JOIN "rate_limit_windows" w ON w."counter" = u.c
		) a;
		v_changed := array_fill(false, ARRAY[v_n]);
		v_clock := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
		FOR d IN 1 .. v_m LOOP
			CONTINUE WHEN v_pass = 2 AND v_refused[d];
			v_now := coalesce(p_now[d], v_clock);
			-- Without locks each decision is judged on the read alone; under them, in order.
			IF v_pass = 2 THEN
				FOR i IN v_starts[d] .. v_ends[d] LOOP
					IF v_previous[i] IS NOT NULL THEN
						v_states[i] := v_states[v_previous[i]];
					END IF;
				END LOOP;
			END IF;
			v_allowed := true;
			FOR i IN v_starts[d] .. v_ends[d] LOOP
				v_row := v_states[i];
				IF v_row."counter" IS NOT NULL AND v_row."limit" = p_limits[i] AND v_row."duration_ms" = p_durations_ms[i] THEN
					v_used := 0;
					FOR j IN 1 .. coalesce(cardinality(v_row."counts"), 0) LOOP
						IF v_row."counts"[j] > 0 AND v_row."latest"[j] + v_row."duration_ms" > v_now THEN
							v_used := v_used + v_row."counts"[j];
						END IF;
					END LOOP;
					IF v_used >= p_limits[i] THEN v_allowed := false; END IF;
				END IF;
			END LOOP;
			CONTINUE WHEN v_pass = 1 AND v_allowed;
			IF v_pass = 1 THEN v_refused[d] := true; END IF;
			FOR i IN v_starts[d] .. v_ends[d] LOOP
				v_limit := p_limits[i];
				v_duration := p_durations_ms[i];
				v_row := v_states[i];
				v_epochs := '{}';
				v_counts := '{}';
				v_latest := '{}';
				v_live := v_row."counter" IS NOT NULL AND v_row."limit" = v_limit AND v_row."duration_ms" = v_duration;
				IF v_live THEN
					-- Only the sub-windows that still hold anything.
					FOR j IN 1 .. coalesce(cardinality(v_row."epochs"), 0) LOOP
						IF v_row."counts"[j] > 0 AND v_row."latest"[j] + v_duration > v_now THEN
							v_epochs := v_epochs || v_row."epochs"[j];
							v_counts := v_counts || v_row."counts"[j];
							v_latest := v_latest || v_row."latest"[j];
						END IF;
					END LOOP;
				END IF;
				v_epoch := NULL;
				IF v_allowed THEN
					v_epoch := v_now / (v_duration / 20);
					v_k := cardinality(v_epochs);
					-- A clock that stepped back lands in the newest sub-window: held a little longer, never less.
					IF v_k > 0 AND v_epochs[v_k] >= v_epoch THEN
						v_epoch := v_epochs[v_k];
						v_counts[v_k] := v_counts[v_k] + 1;
						v_latest[v_k] := greatest(v_latest[v_k], v_now);
					ELSE
						v_epochs := v_epochs || v_epoch;
						v_counts := v_counts || 1;
						v_latest := v_latest || v_now;
					END IF;
					v_row."counter" := p_counters[i];
					v_row."limit" := v_limit;
					v_row."duration_ms" := v_duration;
					v_row."epochs" := v_epochs;
					v_row."counts" := v_counts;
					v_row."latest" := v_latest;
					v_row."idle_at" := v_latest[cardinality(v_latest)] + v_duration;
					v_states[i] := v_row;
					v_changed[i] := true;
				END IF;
				v_used := 0;
				FOR j IN 1 .. coalesce(cardinality(v_counts), 0) LOOP
					v_used := v_used + v_counts[j];
				END LOOP;
				v_next := v_now;
				IF v_used >= v_limit THEN
					v_excess := v_used - v_limit + 1;
					FOR j IN 1 .. cardinality(v_counts) LOOP
						v_excess := v_excess - v_counts[j];
						IF v_excess <= 0 THEN
							v_next := v_latest[j] + v_duration;
							EXIT;
						END IF;
					END LOOP;
				END IF;
				o_allowed[i] := v_allowed;
				o_now[i] := v_now;
				o_remaining[i] := greatest(0, v_limit - v_used);
				o_reset[i] := CASE WHEN v_used > 0 THEN v_latest[cardinality(v_latest)] + v_duration ELSE v_now END;
				o_next[i] := v_next;
				o_epoch[i] := v_epoch;
			END LOOP;
		END LOOP;
		EXIT WHEN NOT (false = ANY(v_refused));
	END LOOP;
	-- Each changed counter written once, with its state after the batch's last decision on it.
	UPDATE "rate_limit_windows" w SET "limit" = s."limit", "duration_ms" = s."duration_ms",
		"epochs" = s."epochs", "counts" = s."counts", "latest" = s."latest", "idle_at" = s."idle_at"
		FROM (
			SELECT DISTINCT ON ((v_states[g])."counter") (v_states[g]).* FROM generate_series(1, v_n) AS g
			WHERE v_changed[g] ORDER BY (v_states[g])."counter", g DESC
		) s
		WHERE w."counter" = s."counter";
	RETURN QUERY SELECT p_decisions[i], p_counters[i], o_allowed[i], o_now[i], o_remaining[i], o_reset[i], o_next[i], o_epoch[i]
		FROM generate_series(1, v_n) AS i;
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
