-- Queries of the worker's connection pool (worker/run.py).

-- name: configure
-- Run on every new connection: a paused or partitioned worker must not hold row locks
-- forever; Postgres ends its session once it idles this long inside a transaction. A killed
-- worker's session whose statement is still running (waiting on a lock, say) ends within
-- the check interval of its socket closing, not when the statement would have finished,
-- so the rows it holds pass to the attempt that takes its slot over.
SELECT set_config('idle_in_transaction_session_timeout', %(idle_ms)s, false),
       set_config('client_connection_check_interval', '2000', false)
