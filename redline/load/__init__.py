"""The load: running redline-load and reading its report (redline_load), and a suite's several
client groups at once (groups)."""
