"""The fleet: work on Redis Streams, agents per platform, one collector (docs/fleet.md)."""
