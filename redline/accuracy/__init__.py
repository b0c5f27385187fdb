"""redline's own accuracy (issue #32): the corpus of known upstream performance changes
(accuracy/corpus.yaml) read and checked (corpus, history), the tests an entry is measured on
(workloads: catalogue suites, or a suite made from the entry's memtier command line), what each
entry measures and how (plan), the measurement itself through redline's compare and bisection
into one store that a later run resumes (runner), and the pure scoring and table (scoring, table)."""
