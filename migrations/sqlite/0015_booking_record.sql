-- The rest of a booking's record (issue 15): its status, the stages of the patient's journey,
-- the messages it was flagged to send, a video link, whether it was billed, and metadata (a
-- JSON array of [key, value] pairs, at most 50). A failed booking (its online payment or
-- confirmation failed) holds no slot, like a cancelled one: the no-overlap rule leaves it out.
ALTER TABLE bookings ADD COLUMN status TEXT NOT NULL DEFAULT 'confirmed'
    CHECK (status IN ('pending', 'processing', 'confirmed', 'failed'));
ALTER TABLE bookings ADD COLUMN arrived_at INTEGER;
ALTER TABLE bookings ADD COLUMN consultation_at INTEGER;
ALTER TABLE bookings ADD COLUMN departed_at INTEGER;
ALTER TABLE bookings ADD COLUMN dna_at INTEGER;
ALTER TABLE bookings ADD COLUMN send_confirmation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN send_reminder INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN send_followup INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN send_cancellation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN video_url TEXT;
ALTER TABLE bookings ADD COLUMN billed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bookings ADD COLUMN metadata TEXT NOT NULL DEFAULT '[]';

DROP TRIGGER bookings_no_overlap_insert;
DROP TRIGGER bookings_no_overlap_update;
CREATE TRIGGER bookings_no_overlap_insert BEFORE INSERT ON bookings
WHEN NEW.cancelled_at IS NULL AND NEW.status <> 'failed' AND EXISTS (
    SELECT 1 FROM bookings b
    WHERE b.practice_id = NEW.practice_id AND b.doctor_id = NEW.doctor_id
      AND b.cancelled_at IS NULL AND b.status <> 'failed'
      AND b.start_at < NEW.end_at AND NEW.start_at < b.end_at
)
BEGIN
    SELECT RAISE(ABORT, 'bookings_no_overlap');
END;
CREATE TRIGGER bookings_no_overlap_update
BEFORE UPDATE OF doctor_id, start_at, end_at, cancelled_at, status ON bookings
WHEN NEW.cancelled_at IS NULL AND NEW.status <> 'failed' AND EXISTS (
    SELECT 1 FROM bookings b
    WHERE b.practice_id = NEW.practice_id AND b.doctor_id = NEW.doctor_id AND b.id <> NEW.id
      AND b.cancelled_at IS NULL AND b.status <> 'failed'
      AND b.start_at < NEW.end_at AND NEW.start_at < b.end_at
)
BEGIN
    SELECT RAISE(ABORT, 'bookings_no_overlap');
END;
