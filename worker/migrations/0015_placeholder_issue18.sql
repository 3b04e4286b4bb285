-- Placeholder in the issue-18 clone only (not to merge): /work/main's 0015 comes from
-- another issue; migration numbers must have no gaps for the tests to run.
SELECT 1;
