-- Written by hand (drizzle-kit generate --custom): replaces keygate_rate_limit_batch (migration 0006),
-- which could admit more than a shared limit. In 0006 the second pass chained each decision to the
-- previous position of the same counter in the batch (lag(...) OVER (PARTITION BY counter)); when that
-- position belonged to a decision refused in the first pass, it still held the state read before the
-- batch, so the admissions of the batch before it were lost. A user's limit shared by key f (no limit
-- of its own) and key e (its own limit used up): F, E, F, E, F admitted three F's per call.
--
-- Now each counter of the batch has one state (a slot per distinct counter), read once per pass, and
-- the decisions are decided strictly in the order given, each reading and updating its counters' slots:
-- every decision sees every earlier admission of the batch on every counter it touches, whatever was
-- refused in between. The rest is as before: one call, one round trip, the same arguments and rows;
-- a decision refused on the first read without locks is answered from it (counts only grow and times
-- only advance under the locks, and the batch's own admissions only add to them); the counters of the
-- others are locked one by one in counter order (no deadlock between replicas), read again, decided in
-- order in memory, and each changed counter written once.
CREATE OR REPLACE FUNCTION "keygate_rate_limit_batch"(
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
	-- The batch's distinct counters in counter order, and each position's slot among them.
	v_names text[];
	v_slots integer[];
	-- By slot: the counter's window (NULL when missing), as read and then as the decisions so far left it.
	v_states "rate_limit_windows"[];
	v_changed boolean[];
	v_slot integer;
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
	SELECT array_agg(DISTINCT u.c ORDER BY u.c) INTO v_names FROM unnest(p_counters) AS u(c);
	SELECT array_agg(array_position(v_names, u.c) ORDER BY u.o) INTO v_slots
		FROM unnest(p_counters) WITH ORDINALITY AS u(c, o);
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
		SELECT array_agg(w ORDER BY n.o) INTO v_states
			FROM unnest(v_names) WITH ORDINALITY AS n(c, o)
			LEFT JOIN "rate_limit_windows" w ON w."counter" = n.c;
		v_changed := array_fill(false, ARRAY[cardinality(v_names)]);
		v_clock := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
		FOR d IN 1 .. v_m LOOP
			CONTINUE WHEN v_pass = 2 AND v_refused[d];
			v_now := coalesce(p_now[d], v_clock);
			-- Pass 1 changes no slot, so each decision is judged on the read alone; pass 2 decides in
			-- order, each decision on the slots as the admissions before it left them.
			v_allowed := true;
			FOR i IN v_starts[d] .. v_ends[d] LOOP
				v_row := v_states[v_slots[i]];
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
				v_slot := v_slots[i];
				v_limit := p_limits[i];
				v_duration := p_durations_ms[i];
				v_row := v_states[v_slot];
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
					v_states[v_slot] := v_row;
					v_changed[v_slot] := true;
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
			SELECT (v_states[g]).* FROM generate_series(1, cardinality(v_names)) AS g WHERE v_changed[g]
		) s
		WHERE w."counter" = s."counter";
	RETURN QUERY SELECT p_decisions[i], p_counters[i], o_allowed[i], o_now[i], o_remaining[i], o_reset[i], o_next[i], o_epoch[i]
		FROM generate_series(1, v_n) AS i;
END
$$;
