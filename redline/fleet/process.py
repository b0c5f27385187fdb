"""What every fleet process shares: its Redis connection, its one-line-per-event log, and how it
stops on SIGTERM / Ctrl-C."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import redis

from redline.core.errors import RunError, UsageError
from redline.core.redaction import redact
from redline.core.terminal import printable


def read_password(path: Path) -> str:
    """The first line of a password file (`--redis-password-file`; `fleet local` writes one, 0600)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--redis-password-file {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    password = text.splitlines()[0].strip() if text.strip() else ""
    if not password:
        raise UsageError(f"--redis-password-file {path} is empty")
    return password


def connect(url: str, password_file: Path | None = None) -> redis.Redis:
    """A client for `redis://[user[:password]@]host:port/db` (`rediss://` for TLS, as redis-py reads
    them), the password read from `password_file` when given (never needed on a command line);
    unreachable is a runtime failure in one line, a missing or wrong password a usage error. No
    message shows the password."""
    shown = redact(url)
    try:
        parts = urlsplit(url)
        parts.port
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("expected redis://HOST:PORT/DB, rediss:// (TLS) or unix://PATH")
        password = read_password(password_file) if password_file else None
        if password is not None and (parts.password or "password=" in parts.query):
            raise UsageError(f"--redis {shown} holds a password and --redis-password-file gives one: give it once")
        client = redis.Redis.from_url(url, password=password, decode_responses=True, socket_connect_timeout=10,
                                      health_check_interval=30)
    except ValueError as exc:
        raise UsageError(f"--redis {shown}: {redact(str(exc))}") from None
    given = password is not None or parts.password is not None or "password=" in parts.query
    try:
        client.ping()
    except (redis.AuthenticationError, redis.ResponseError) as exc:
        if not isinstance(exc, redis.AuthenticationError) and "NOAUTH" not in str(exc):
            raise RunError(f"Redis at {shown}: {redact(str(exc))}") from None
        if given:
            raise UsageError(f"Redis at {shown} refused the password ({redact(str(exc))}): check "
                             "--redis-password-file or the password in REDLINE_REDIS") from None
        raise UsageError(f"Redis at {shown} requires a password: give --redis-password-file FILE "
                         "(or $REDLINE_REDIS_PASSWORD_FILE, or the password in the URL of $REDLINE_REDIS)") from None
    except redis.RedisError as exc:
        raise RunError(f"cannot reach Redis at {shown}: {redact(str(exc))}") from None
    return client


def log(role: str, event: str, **fields) -> None:
    """One line per event on stderr: time, who, what, key=value details."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    details = " ".join(f"{key}={value}" for key, value in fields.items() if value is not None)
    line = redact(f"{stamp} {role}: {event}" + (f" {details}" if details else ""))
    print(printable(line).replace("\n", "\\n"),
          file=sys.stderr, flush=True)


REDIS_RETRY_S = 2.0
REDIS_OUTAGE_S = 600.0      # a Redis away longer than this ends the process (exit 1)


def while_reachable(stopping: "Stopping", say, action, *, during: str):
    """`action()`, tried again every REDIS_RETRY_S while Redis is unreachable or still loading its
    AOF (a restart), for at most REDIS_OUTAGE_S or until a stop is requested."""
    deadline = time.monotonic() + REDIS_OUTAGE_S
    while True:
        try:
            return action()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if stopping.requested or time.monotonic() > deadline:
                raise RunError(f"Redis unreachable during {during}: {exc}") from exc
            say("redis unreachable, retrying", during=during, error=exc)
            stopping.event.wait(REDIS_RETRY_S)


class Stopping:
    """SIGTERM and SIGINT set a flag the process's loop looks at between two Redis calls.
    Inside `interruptible()` (a job being measured) they raise KeyboardInterrupt instead, so the
    engine stops its servers at once."""

    def __init__(self, *, wake_on_child_exit: bool = False):
        self.event = threading.Event()
        self.wake = threading.Event()          # set by every signal handled here (SIGCHLD too, if asked)
        self._interruptible = False
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)
        if wake_on_child_exit:
            signal.signal(signal.SIGCHLD, lambda signum, frame: self.wake.set())

    def _handle(self, signum, frame):
        self.event.set()
        self.wake.set()
        if self._interruptible:
            self._interruptible = False
            raise KeyboardInterrupt

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def interruptible(self):
        stopping = self

        class _Scope:
            def __enter__(self):
                if stopping.requested:
                    raise KeyboardInterrupt
                stopping._interruptible = True

            def __exit__(self, *exc):
                stopping._interruptible = False
                return False
        return _Scope()
