DROP INDEX "api_keys_user_expires";--> statement-breakpoint
DROP INDEX "api_keys_user_created";--> statement-breakpoint
CREATE INDEX "api_keys_user_created" ON "api_keys" USING btree ("user_id","created_at","id","expires_at");