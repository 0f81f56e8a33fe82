-- Access groups and the practice's numbers are listed by name: in byte order, as SQLite sorts
-- and as every other listed name here is (0001: list columns are COLLATE "C"), not in the
-- database's locale, which sorted "beta" before "Zeta" where SQLite sorts "Zeta" first.
ALTER TABLE access_groups ALTER COLUMN name TYPE TEXT COLLATE "C";
ALTER TABLE practice_numbers ALTER COLUMN name TYPE TEXT COLLATE "C";
