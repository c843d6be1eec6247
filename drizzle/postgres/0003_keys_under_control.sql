CREATE TABLE "key_credits" (
	"lineage" text PRIMARY KEY NOT NULL,
	"remaining" bigint NOT NULL,
	"refill_amount" bigint,
	"refill_interval_ms" bigint,
	"refilled_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "key_usage" (
	"key_id" text NOT NULL,
	"bucket" bigint NOT NULL,
	"valid" bigint DEFAULT 0 NOT NULL,
	"rate_limited" bigint DEFAULT 0 NOT NULL,
	"usage_exceeded" bigint DEFAULT 0 NOT NULL,
	"denied" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "key_usage_key_id_bucket_pk" PRIMARY KEY("key_id","bucket")
);
--> statement-breakpoint
CREATE TABLE "settings" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "subjects" (
	"user_id" bigserial PRIMARY KEY NOT NULL,
	"issuer" text NOT NULL,
	"subject" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "lineage" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "rotated_at" bigint;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "enabled" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "meta" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "ratelimit_limit" integer;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "ratelimit_duration" integer;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "last_used_at" bigint;--> statement-breakpoint
CREATE INDEX "key_usage_bucket" ON "key_usage" USING btree ("bucket");--> statement-breakpoint
CREATE UNIQUE INDEX "subjects_issuer_subject" ON "subjects" USING btree ("issuer","subject");--> statement-breakpoint
CREATE INDEX "api_keys_lineage" ON "api_keys" USING btree ("lineage") WHERE "api_keys"."lineage" IS NOT NULL;