-- Where a delivery's schedule of attempts starts: the attempts made before it. A redelivery
-- starts a fresh schedule (its next retry is the schedule's second delay, not the one after its
-- last attempt), while its attempts keep their numbers in webhook_attempts.
ALTER TABLE webhook_deliveries ADD COLUMN schedule_from BIGINT NOT NULL DEFAULT 0;
