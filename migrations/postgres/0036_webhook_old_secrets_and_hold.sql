-- Every old secret of a subscription that still signs, with when it stops: a second rotation
-- within a day of the first keeps the first's old secret signing beside the second's, where
-- the one column of a previous secret let it go at once. JSON: [{"secret", "until"}].
ALTER TABLE webhook_subscriptions ADD COLUMN old_secrets TEXT NOT NULL DEFAULT '[]';
UPDATE webhook_subscriptions
SET old_secrets = json_build_array(json_build_object('secret', previous_secret, 'until', previous_secret_until))::text
WHERE previous_secret IS NOT NULL AND previous_secret_until IS NOT NULL;
ALTER TABLE webhook_subscriptions DROP COLUMN previous_secret;
ALTER TABLE webhook_subscriptions DROP COLUMN previous_secret_until;
-- Until when the receiver asked, with Retry-After, to be sent nothing: every delivery of the
-- subscription waits until then, not only the one that was answered so.
ALTER TABLE webhook_subscriptions ADD COLUMN held_until BIGINT;
