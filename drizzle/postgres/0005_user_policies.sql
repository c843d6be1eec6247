CREATE TABLE "user_credits" (
	"user_id" bigint PRIMARY KEY NOT NULL,
	"remaining" bigint NOT NULL,
	"refill_amount" bigint,
	"refill_interval_ms" bigint,
	"refilled_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "user_policies" (
	"user_id" bigint PRIMARY KEY NOT NULL,
	"ratelimit_limit" integer,
	"ratelimit_duration" integer,
	"max_keys" integer,
	"max_level" integer
);
