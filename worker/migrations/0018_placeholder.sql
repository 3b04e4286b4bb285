-- Placeholder for a migration another change adds under this number; dropped at merge.
SELECT 1;
