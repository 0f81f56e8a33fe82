-- What a product search looks in: the product's name and item code, each lower-cased by the
-- server (Unicode's rules, as the search text is; SQL's LOWER is ASCII-only on SQLite and on
-- a column of collation "C"), written with every insert and update (src/store/products.rs).
-- The server fills it for the products made before, as it starts (Store::migrate).
ALTER TABLE products ADD COLUMN search_text TEXT;
