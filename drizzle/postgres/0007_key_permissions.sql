ALTER TABLE "api_keys" ADD COLUMN "permissions" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "allowed_ips" text;--> statement-breakpoint
ALTER TABLE "user_policies" ADD COLUMN "permissions" text;