-- Counts the keys already stored, so the counter starts in step with api_keys.
INSERT INTO `user_key_counts` (`user_id`, `keys`) SELECT `user_id`, count(*) FROM `api_keys` GROUP BY `user_id`;
