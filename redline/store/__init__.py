"""The result store: one SQLite file (results) and the one session document every output reads
(session)."""
