"""A server under test: its process (process), what its binary supports (traits), what build it is
(identity), where it comes from (targets), and what redline watches and reads off it while load
runs (watch, probes)."""
