"""This machine and its processes: /proc readings (procfs), facts recorded with every run
(machine), CPU pinning primitives (pinning), child processes that never outlive redline
(children), work directories (workdirs), the cache root (cache_dir)."""
