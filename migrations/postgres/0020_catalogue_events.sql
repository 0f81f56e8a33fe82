-- Changes to the practice's catalogue are events too (ours: product.*, location.*,
-- accessGroup.created, practiceNumber.created): the id of the record they name.
ALTER TABLE events ADD COLUMN record_id TEXT;
