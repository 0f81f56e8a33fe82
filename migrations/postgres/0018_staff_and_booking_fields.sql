-- What clients read of staff and bookings beyond the rest (issue 15): a staff user's pronouns
-- and metadata (a JSON array of [key, value] pairs, at most 50, as for bookings), and a
-- booking's online payment status, as the booking widget that took the payment reports it.
ALTER TABLE users ADD COLUMN pronouns TEXT;
ALTER TABLE users ADD COLUMN metadata TEXT NOT NULL DEFAULT '[]';
ALTER TABLE bookings ADD COLUMN online_payment_status TEXT;
