"""redline on this machine: the composition root (the engine over real servers, storing into a
store: `local.local_engine`), a job executed through it (`local.execute_job`), and a session of
jobs with its sides made ready (`session.execute_session`). Commands, bisect and the fleet's
agents all reach the engine through here."""
