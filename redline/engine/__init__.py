"""The one execution engine (engine): which run comes next and where every run goes, over a job
(job: one test × topology as data), what a session asks for (run_plan: sides, run settings,
observers) and where runs go (sinks). It knows nothing of servers."""
