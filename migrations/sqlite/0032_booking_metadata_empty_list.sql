-- Bookings made through the API were stored with an empty text as their metadata, where the
-- column's default is an empty JSON list: the metadata filter then failed on them, as an empty
-- text is not JSON. Such a booking has no metadata.
UPDATE bookings SET metadata = '[]' WHERE metadata = '';
