#!/usr/bin/env sysbench
-- The serverless pattern for bench/mysql.sh: every event opens a new
-- connection (the --mysql-* options: handshake, authentication, database),
-- runs one SELECT 1 and disconnects. sysbench's "transactions" are
-- connections, its latency one connect-query-disconnect.
--
--   sysbench bench/mysql-connect.lua --mysql-host=127.0.0.1 --mysql-port=PORT \
--     --mysql-user=USER --mysql-password=PW --mysql-db=DB --mysql-ssl=off \
--     --threads=50 --time=10 run

function thread_init()
   drv = sysbench.sql.driver()
end

function event()
   local con = drv:connect()
   con:query("SELECT 1")
   con:disconnect()
end

function thread_done()
   drv:destroy()
end
