CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"secret_hash" text NOT NULL,
	"user_id" bigint NOT NULL,
	"level" smallint NOT NULL,
	"name" text NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "api_keys_user_expires" ON "api_keys" USING btree ("user_id","expires_at");--> statement-breakpoint
CREATE INDEX "api_keys_user_created" ON "api_keys" USING btree ("user_id","created_at","id");--> statement-breakpoint
CREATE INDEX "api_keys_expires" ON "api_keys" USING btree ("expires_at");