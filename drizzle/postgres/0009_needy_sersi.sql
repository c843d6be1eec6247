ALTER TABLE "api_keys" ADD COLUMN "leaked_at" bigint;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "leak_source" text;--> statement-breakpoint
CREATE INDEX "api_keys_secret_hash" ON "api_keys" USING btree ("secret_hash");