-- Placeholder for helper "caps"' 0003_caps.sql, so that 0004_sessions.sql
-- applies on this branch (migrations must be numbered without a gap).
-- At merge, take the caps branch's file and drop this one.
SELECT 1;
