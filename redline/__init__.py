"""redline: a zero-touch performance lab for Redis-protocol servers."""

__version__ = "0.1.0"
