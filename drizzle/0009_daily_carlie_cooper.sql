ALTER TABLE `api_keys` ADD `leaked_at` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `leak_source` text;--> statement-breakpoint
CREATE INDEX `api_keys_secret_hash` ON `api_keys` (`secret_hash`);