-- The practice's catalogue (issue 15). What a practice books or sells is a product; an
-- appointment type is the bookable kind of product, so the table of appointment types becomes
-- the table of products, each appointment type kept with its id (bookings' foreign keys follow
-- the rename). Only an appointment needs a duration, so the column becomes nullable.
ALTER TABLE appointment_types RENAME TO products;
ALTER TABLE products RENAME COLUMN title TO name;
ALTER INDEX appointment_types_by_title RENAME TO products_by_name;
ALTER TABLE products ALTER COLUMN duration DROP NOT NULL;
-- 'appointment' (bookable, with a duration), 'service' or 'item'; fixed once made.
ALTER TABLE products ADD COLUMN product_type TEXT NOT NULL DEFAULT 'appointment';
-- 'active' or 'inactive' (no longer offered: kept for the bookings and sales that name it).
ALTER TABLE products ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
ALTER TABLE products ADD COLUMN cost DOUBLE PRECISION;
ALTER TABLE products ADD COLUMN item_code TEXT;
ALTER TABLE products ADD COLUMN color TEXT;
ALTER TABLE products ADD COLUMN comments TEXT;
ALTER TABLE products ADD COLUMN is_bookable BIGINT NOT NULL DEFAULT 1;
ALTER TABLE products ADD COLUMN is_video_consultation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE products ADD COLUMN requires_payment BIGINT NOT NULL DEFAULT 0;
ALTER TABLE products ADD COLUMN requires_confirmation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE products ADD COLUMN tax_name TEXT;
ALTER TABLE products ADD COLUMN tax_rate BIGINT;
ALTER TABLE products ADD COLUMN tax_code TEXT;
-- JSON arrays: the ids of the practice's labels on the product; its metadata as [key, value]
-- pairs (at most 50, as for bookings).
ALTER TABLE products ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';
ALTER TABLE products ADD COLUMN metadata TEXT NOT NULL DEFAULT '[]';
CREATE INDEX products_by_type ON products (practice_id, product_type, name);

-- Locations are rooms grouped by site: the site's name (none: the location is a site of its
-- own). What a location and a practitioner provide: JSON arrays of appointment products' ids.
ALTER TABLE locations ADD COLUMN group_name TEXT;
ALTER TABLE locations ADD COLUMN services_provided TEXT NOT NULL DEFAULT '[]';
ALTER TABLE users ADD COLUMN services_provided TEXT NOT NULL DEFAULT '[]';
