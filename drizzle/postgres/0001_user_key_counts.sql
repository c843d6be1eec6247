CREATE TABLE "user_key_counts" (
	"user_id" bigint PRIMARY KEY NOT NULL,
	"keys" integer NOT NULL
);
--> statement-breakpoint
-- Written by hand (drizzle-kit generates no triggers). The counter is kept in step by the database
-- itself, in the writing transaction, so rows written by any client (an older replica during a
-- rolling upgrade, an operator's import) are counted too. A key never changes user, so only INSERT
-- and DELETE matter; per statement, so a purge of many rows updates each user's counter once.
CREATE FUNCTION "keygate_count_inserted_keys"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO "user_key_counts" ("user_id", "keys")
		SELECT "user_id", count(*) FROM "inserted_keys" GROUP BY "user_id" ORDER BY "user_id"
		ON CONFLICT ("user_id") DO UPDATE SET "keys" = "user_key_counts"."keys" + EXCLUDED."keys";
	RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE FUNCTION "keygate_count_deleted_keys"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- The counters are locked in user order first: two purges that share users cannot deadlock.
	PERFORM 1 FROM "user_key_counts" WHERE "user_id" IN (SELECT "user_id" FROM "deleted_keys")
		ORDER BY "user_id" FOR UPDATE;
	UPDATE "user_key_counts" SET "keys" = "user_key_counts"."keys" - "gone"."n"
		FROM (SELECT "user_id", count(*) AS "n" FROM "deleted_keys" GROUP BY "user_id") AS "gone"
		WHERE "user_key_counts"."user_id" = "gone"."user_id";
	RETURN NULL;
END
$$;
--> statement-breakpoint
-- The triggers come before the backfill: CREATE TRIGGER locks api_keys against writes until this
-- migration commits, so no key can be written between the count below and the first trigger.
CREATE TRIGGER "api_keys_count_inserted" AFTER INSERT ON "api_keys"
	REFERENCING NEW TABLE AS "inserted_keys" FOR EACH STATEMENT EXECUTE FUNCTION "keygate_count_inserted_keys"();
--> statement-breakpoint
CREATE TRIGGER "api_keys_count_deleted" AFTER DELETE ON "api_keys"
	REFERENCING OLD TABLE AS "deleted_keys" FOR EACH STATEMENT EXECUTE FUNCTION "keygate_count_deleted_keys"();
--> statement-breakpoint
-- Counts the keys already stored, so the counter starts in step with api_keys.
INSERT INTO "user_key_counts" ("user_id", "keys") SELECT "user_id", count(*) FROM "api_keys" GROUP BY "user_id";
