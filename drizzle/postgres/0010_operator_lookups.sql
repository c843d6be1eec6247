CREATE TABLE "key_creations" (
	"bucket" bigint NOT NULL,
	"shard" smallint DEFAULT 0 NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "key_creations_bucket_shard_pk" PRIMARY KEY("bucket","shard")
);
--> statement-breakpoint
CREATE TABLE "verification_counts" (
	"bucket" bigint NOT NULL,
	"code" text NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "verification_counts_bucket_code_pk" PRIMARY KEY("bucket","code")
);
--> statement-breakpoint
CREATE INDEX "api_keys_created" ON "api_keys" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "api_keys_id_prefix" ON "api_keys" USING btree ("id" text_pattern_ops);