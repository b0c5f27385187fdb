"""Results to where the field already looks: RedisTimeSeries in the Redis Benchmarks
Specification's key scheme (scheme.py), written by redistimeseries.py, read from the store by
runs.py."""
