"""What runs against a real server for the engine: can the test run here (admission), filling a
server (preparation), which snapshot the data is cached as (snapshot_plan), the same-state rule
(state), and the timed TestRunner (server_runner)."""
