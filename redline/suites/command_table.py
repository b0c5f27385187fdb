"""Which Redis commands read the keyspace and which write it.

Derived from the `command_flags` of the command reference shipped with the upstream
catalogue (commands.json of the Redis Benchmarks Specification): a command is a *read* when
it is flagged `readonly` and not `write`, a *write* when it is flagged `write`. Commands in
neither set (PING, INFO, EVAL, PUBLISH, module commands, ...) are "other": they do not tell us
whether a workload measures the hit or the miss path. Subcommands are spelled "CONTAINER SUB".
"""
from __future__ import annotations

READ_COMMANDS = frozenset({
    'BITCOUNT', 'BITFIELD_RO', 'BITPOS', 'DBSIZE', 'DUMP', 'EVALSHA_RO', 'EVAL_RO', 'EXISTS',
    'EXPIRETIME', 'FCALL_RO', 'GEODIST', 'GEOHASH', 'GEOPOS', 'GEORADIUSBYMEMBER_RO',
    'GEORADIUS_RO', 'GEOSEARCH', 'GET', 'GETBIT', 'GETRANGE', 'HEXISTS', 'HEXPIRETIME', 'HGET',
    'HGETALL', 'HKEYS', 'HLEN', 'HMGET', 'HPEXPIRETIME', 'HPTTL', 'HRANDFIELD', 'HSCAN',
    'HSTRLEN', 'HTTL', 'HVALS', 'KEYS', 'LCS', 'LINDEX', 'LLEN', 'LOLWUT', 'LPOS', 'LRANGE',
    'MEMORY USAGE', 'MGET', 'OBJECT ENCODING', 'OBJECT FREQ', 'OBJECT IDLETIME',
    'OBJECT REFCOUNT', 'PEXPIRETIME', 'PFCOUNT', 'PTTL', 'RANDOMKEY', 'SCAN', 'SCARD', 'SDIFF',
    'SINTER', 'SINTERCARD', 'SISMEMBER', 'SMEMBERS', 'SMISMEMBER', 'SORT_RO', 'SRANDMEMBER',
    'SSCAN', 'STRLEN', 'SUBSTR', 'SUNION', 'TOUCH', 'TTL', 'TYPE', 'VCARD', 'VDIM', 'VEMB',
    'VGETATTR', 'VINFO', 'VISMEMBER', 'VLINKS', 'VRANDMEMBER', 'VSIM', 'XINFO CONSUMERS',
    'XINFO GROUPS', 'XINFO STREAM', 'XLEN', 'XPENDING', 'XRANGE', 'XREAD', 'XREVRANGE',
    'ZCARD', 'ZCOUNT', 'ZDIFF', 'ZINTER', 'ZINTERCARD', 'ZLEXCOUNT', 'ZMSCORE', 'ZRANDMEMBER',
    'ZRANGE', 'ZRANGEBYLEX', 'ZRANGEBYSCORE', 'ZRANK', 'ZREVRANGE', 'ZREVRANGEBYLEX',
    'ZREVRANGEBYSCORE', 'ZREVRANK', 'ZSCAN', 'ZSCORE', 'ZUNION',
})

WRITE_COMMANDS = frozenset({
    'APPEND', 'BITFIELD', 'BITOP', 'BLMOVE', 'BLMPOP', 'BLPOP', 'BRPOP', 'BRPOPLPUSH',
    'BZMPOP', 'BZPOPMAX', 'BZPOPMIN', 'COPY', 'DECR', 'DECRBY', 'DEL', 'EXPIRE', 'EXPIREAT',
    'FLUSHALL', 'FLUSHDB', 'FUNCTION DELETE', 'FUNCTION FLUSH', 'FUNCTION LOAD',
    'FUNCTION RESTORE', 'GEOADD', 'GEORADIUS', 'GEORADIUSBYMEMBER', 'GEOSEARCHSTORE', 'GETDEL',
    'GETEX', 'GETSET', 'HDEL', 'HEXPIRE', 'HEXPIREAT', 'HGETDEL', 'HGETEX', 'HINCRBY',
    'HINCRBYFLOAT', 'HMSET', 'HPERSIST', 'HPEXPIRE', 'HPEXPIREAT', 'HSET', 'HSETEX', 'HSETNX',
    'INCR', 'INCRBY', 'INCRBYFLOAT', 'LINSERT', 'LMOVE', 'LMPOP', 'LPOP', 'LPUSH', 'LPUSHX',
    'LREM', 'LSET', 'LTRIM', 'MIGRATE', 'MOVE', 'MSET', 'MSETNX', 'PERSIST', 'PEXPIRE',
    'PEXPIREAT', 'PFADD', 'PFDEBUG', 'PFMERGE', 'PSETEX', 'RENAME', 'RENAMENX', 'RESTORE',
    'RESTORE-ASKING', 'RPOP', 'RPOPLPUSH', 'RPUSH', 'RPUSHX', 'SADD', 'SDIFFSTORE', 'SET',
    'SETBIT', 'SETEX', 'SETNX', 'SETRANGE', 'SINTERSTORE', 'SMOVE', 'SORT', 'SPOP', 'SREM',
    'SUNIONSTORE', 'SWAPDB', 'UNLINK', 'VADD', 'VREM', 'VSETATTR', 'XACK', 'XADD',
    'XAUTOCLAIM', 'XCLAIM', 'XDEL', 'XGROUP CREATE', 'XGROUP CREATECONSUMER',
    'XGROUP DELCONSUMER', 'XGROUP DESTROY', 'XGROUP SETID', 'XREADGROUP', 'XSETID', 'XTRIM',
    'ZADD', 'ZDIFFSTORE', 'ZINCRBY', 'ZINTERSTORE', 'ZMPOP', 'ZPOPMAX', 'ZPOPMIN',
    'ZRANGESTORE', 'ZREM', 'ZREMRANGEBYLEX', 'ZREMRANGEBYRANK', 'ZREMRANGEBYSCORE',
    'ZUNIONSTORE',
})


def command_kind(argv: list[str]) -> str:
    """"read", "write" or "other" for a command given as argv tokens (case-insensitive)."""
    if not argv:
        return "other"
    name = argv[0].upper()
    if len(argv) > 1:
        full = f"{name} {argv[1].upper()}"
        if full in READ_COMMANDS:
            return "read"
        if full in WRITE_COMMANDS:
            return "write"
    if name in READ_COMMANDS:
        return "read"
    if name in WRITE_COMMANDS:
        return "write"
    return "other"
