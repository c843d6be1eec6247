-- Written by hand (drizzle-kit generate --custom): drizzle's schema cannot express an UNLOGGED table or
-- a function, and only the functions below and src/db/postgres/rate-limits.ts touch this table, so it
-- is not in schema.ts. The rate limiter's sliding windows, one row per counter: UNLOGGED, because the
-- counts may start afresh after a crash (no WAL to write for them); the sub-windows as three parallel
-- arrays, ascending; `idle_at` is when the row stops holding anything (the sweep deletes it then).
CREATE UNLOGGED TABLE "rate_limit_windows" (
	"counter" text PRIMARY KEY NOT NULL,
	"limit" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	"epochs" bigint[] NOT NULL,
	"counts" integer[] NOT NULL,
	"latest" bigint[] NOT NULL,
	"idle_at" bigint NOT NULL
);
--> statement-breakpoint
-- One decision for a verification under one or more limits, on the database's clock: the verification
-- passes when every window holds fewer than its limit, checked again once every counter's row is
-- locked, and only then is it counted on every one. A refusal takes no lock and writes nothing. A
-- counter whose limit or duration changed starts afresh. With p_take false it only reads (check), and
-- the answer always comes from the rows the decision was made on. p_now (ms) replaces the database's
-- clock for tests only; keygate passes NULL. One row per counter, in the order given: the state after the decision and, when
-- counted, the sub-window (epoch) it was counted in, for a refund.
CREATE FUNCTION "keygate_rate_limit"(
	p_counters text[], p_limits integer[], p_durations_ms bigint[], p_take boolean, p_now bigint DEFAULT NULL
) RETURNS TABLE (
	"counter" text, "allowed" boolean, "now_ms" bigint, "remaining" integer, "reset_ms" bigint,
	"next_ms" bigint, "epoch" bigint
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_now bigint;
	v_allowed boolean := true;
	v_row "rate_limit_windows"%ROWTYPE;
	v_lock record;
	v_rows "rate_limit_windows"[];
	v_epochs bigint[];
	v_counts integer[];
	v_latest bigint[];
	v_limit integer;
	v_duration bigint;
	v_used integer;
	v_epoch bigint;
	v_next bigint;
	v_excess integer;
	v_n integer;
BEGIN
	-- First without locks: a window full in this snapshot is full now (counts only grow and times only
	-- advance under the locks), so a refusal waits for no lock and writes nothing. A refund committed
	-- since the snapshot is seen by the next verification.
	FOR v_pass IN 1 .. 2 LOOP
		IF v_pass = 2 THEN
			-- Lock each row, creating a missing one, in counter order: two decisions sharing counters
			-- cannot deadlock. An existing row is only locked (no new row version).
			FOR v_lock IN
				SELECT u.c, u.l, u.d FROM unnest(p_counters, p_limits, p_durations_ms) AS u(c, l, d) ORDER BY u.c
			LOOP
				PERFORM 1 FROM "rate_limit_windows" w WHERE w."counter" = v_lock.c FOR UPDATE;
				IF NOT FOUND THEN
					INSERT INTO "rate_limit_windows" AS w ("counter", "limit", "duration_ms", "epochs", "counts", "latest", "idle_at")
						VALUES (v_lock.c, v_lock.l, v_lock.d, '{}', '{}', '{}', 0)
						ON CONFLICT ("counter") DO UPDATE SET "limit" = w."limit";
				END IF;
			END LOOP;
		END IF;
		-- On the second pass, read after the locks: decisions on one counter see the clock in the order
		-- they count.
		v_now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
		v_allowed := true;
		v_rows := '{}';
		FOR i IN 1 .. cardinality(p_counters) LOOP
			v_row := NULL;
			SELECT * INTO v_row FROM "rate_limit_windows" w WHERE w."counter" = p_counters[i];
			v_rows := v_rows || v_row;
			IF v_row."counter" IS NOT NULL AND v_row."limit" = p_limits[i] AND v_row."duration_ms" = p_durations_ms[i] THEN
				SELECT coalesce(sum(c), 0) INTO v_used
					FROM unnest(v_row."counts", v_row."latest") AS s(c, l) WHERE c > 0 AND l + v_row."duration_ms" > v_now;
				IF v_used >= p_limits[i] THEN v_allowed := false; END IF;
			END IF;
		END LOOP;
		EXIT WHEN NOT (p_take AND v_allowed);
	END LOOP;
	FOR i IN 1 .. cardinality(p_counters) LOOP
		v_limit := p_limits[i];
		v_duration := p_durations_ms[i];
		v_epochs := '{}';
		v_counts := '{}';
		v_latest := '{}';
		v_row := v_rows[i];
		IF v_row."counter" IS NOT NULL AND v_row."limit" = v_limit AND v_row."duration_ms" = v_duration THEN
			-- Only the sub-windows that still hold anything.
			FOR j IN 1 .. cardinality(v_row."epochs") LOOP
				IF v_row."counts"[j] > 0 AND v_row."latest"[j] + v_duration > v_now THEN
					v_epochs := v_epochs || v_row."epochs"[j];
					v_counts := v_counts || v_row."counts"[j];
					v_latest := v_latest || v_row."latest"[j];
				END IF;
			END LOOP;
		END IF;
		v_epoch := NULL;
		IF p_take AND v_allowed THEN
			v_epoch := v_now / (v_duration / 20);
			v_n := cardinality(v_epochs);
			-- A clock that stepped back lands in the newest sub-window: held a little longer, never less.
			IF v_n > 0 AND v_epochs[v_n] >= v_epoch THEN
				v_epoch := v_epochs[v_n];
				v_counts[v_n] := v_counts[v_n] + 1;
				v_latest[v_n] := greatest(v_latest[v_n], v_now);
			ELSE
				v_epochs := v_epochs || v_epoch;
				v_counts := v_counts || 1;
				v_latest := v_latest || v_now;
			END IF;
			UPDATE "rate_limit_windows" w SET "limit" = v_limit, "duration_ms" = v_duration,
				"epochs" = v_epochs, "counts" = v_counts, "latest" = v_latest,
				"idle_at" = v_latest[cardinality(v_latest)] + v_duration
				WHERE w."counter" = p_counters[i];
		END IF;
		v_used := coalesce((SELECT sum(c) FROM unnest(v_counts) AS s(c)), 0);
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
		"counter" := p_counters[i];
		"allowed" := v_allowed;
		"now_ms" := v_now;
		"remaining" := greatest(0, v_limit - v_used);
		"reset_ms" := CASE WHEN v_used > 0 THEN v_latest[cardinality(v_latest)] + v_duration ELSE v_now END;
		"next_ms" := v_next;
		"epoch" := v_epoch;
		RETURN NEXT;
	END LOOP;
END
$$;
--> statement-breakpoint
-- Gives back admissions counted by keygate_rate_limit (a verification refused for credits afterwards):
-- one from each counter's sub-window `epoch`, when the counter's rule is still the one it was counted
-- under. Rows are locked in counter order, as above.
CREATE FUNCTION "keygate_rate_limit_refund"(
	p_counters text[], p_limits integer[], p_durations_ms bigint[], p_epochs bigint[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	v_refund record;
BEGIN
	FOR v_refund IN
		SELECT u.c, u.l, u.d, u.e FROM unnest(p_counters, p_limits, p_durations_ms, p_epochs) AS u(c, l, d, e)
		ORDER BY u.c
	LOOP
		UPDATE "rate_limit_windows" w SET "counts" = (
			SELECT array_agg(CASE WHEN s.e = v_refund.e AND s.c > 0 THEN s.c - 1 ELSE s.c END ORDER BY s.o)
			FROM unnest(w."epochs", w."counts") WITH ORDINALITY AS s(e, c, o)
		)
		WHERE w."counter" = v_refund.c AND w."limit" = v_refund.l AND w."duration_ms" = v_refund.d
			AND v_refund.e = ANY(w."epochs");
	END LOOP;
END
$$;
