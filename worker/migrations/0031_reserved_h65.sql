-- Placeholder so that 0032 applies on a branch without the 0031 another change adds
-- (migrations must be contiguous). DROP THIS FILE when merging that 0031.
SELECT 1;
