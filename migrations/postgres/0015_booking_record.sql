-- The rest of a booking's record (issue 15): its status, the stages of the patient's journey,
-- the messages it was flagged to send, a video link, whether it was billed, and metadata (a
-- JSON array of [key, value] pairs, at most 50). A failed booking (its online payment or
-- confirmation failed) holds no slot, like a cancelled one: the no-overlap rule leaves it out.
ALTER TABLE bookings ADD COLUMN status TEXT NOT NULL DEFAULT 'confirmed'
    CHECK (status IN ('pending', 'processing', 'confirmed', 'failed'));
ALTER TABLE bookings ADD COLUMN arrived_at BIGINT;
ALTER TABLE bookings ADD COLUMN consultation_at BIGINT;
ALTER TABLE bookings ADD COLUMN departed_at BIGINT;
ALTER TABLE bookings ADD COLUMN dna_at BIGINT;
ALTER TABLE bookings ADD COLUMN send_confirmation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN send_reminder BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN send_followup BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN send_cancellation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN video_url TEXT;
ALTER TABLE bookings ADD COLUMN billed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN metadata TEXT NOT NULL DEFAULT '[]';

ALTER TABLE bookings DROP CONSTRAINT bookings_no_overlap;
ALTER TABLE bookings ADD CONSTRAINT bookings_no_overlap EXCLUDE USING gist (
    practice_id WITH =,
    doctor_id WITH =,
    int8range(start_at, end_at) WITH &&
) WHERE (cancelled_at IS NULL AND status <> 'failed');
