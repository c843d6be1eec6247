ALTER TABLE `api_keys` ADD `permissions` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `allowed_ips` text;--> statement-breakpoint
ALTER TABLE `user_policies` ADD `permissions` text;