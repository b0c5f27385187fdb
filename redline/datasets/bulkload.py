"""Fast pipelined loading over raw sockets.

Batches of pre-built RESP bytes (see resp.py) are spread over several connections; each
connection keeps up to `window_bytes` of requests in flight, so the server always has input
queued while the client builds the next batch. Every reply is checked: the loader expects
simple-string or integer replies; an error reply (or anything else) stops the load with a
`BulkLoadError` that names the command it answered.

One thread, non-blocking sockets and `selectors`: no locks, and the client's own work is
only building bytes and counting reply lines.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from .resp import Batch

Progress = Callable[[int, int], None]


class BulkLoadError(Exception):
    """The server refused a command, the connection failed, or replies stopped coming."""


@dataclass(frozen=True)
class LoadStats:
    commands: int
    elements: int
    bytes_sent: int
    seconds: float

    @property
    def elements_per_second(self) -> float:
        return self.elements / self.seconds if self.seconds > 0 else 0.0


@dataclass
class _InFlight:
    batch: Batch
    replies_left: int


@dataclass
class _Connection:
    sock: socket.socket
    name: str
    outgoing: deque = field(default_factory=deque)  # memoryviews still to send
    inflight: deque = field(default_factory=deque)  # _InFlight in send order
    inflight_bytes: int = 0
    partial: bytes = b""


def _connect(host: str, port: int, timeout: float, index: int) -> _Connection:
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise BulkLoadError(f"cannot connect to {host}:{port}: {exc}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    return _Connection(sock=sock, name=f"{host}:{port} connection {index + 1}")


def _reply_lines(conn: _Connection, data: bytes) -> Iterator[bytes]:
    """Complete reply lines in `data` (partial + received); keeps the unfinished tail."""
    lines = data.split(b"\r\n")
    conn.partial = lines.pop()
    return iter(lines)


class _Loader:
    def __init__(
        self,
        *,
        connections: list[_Connection],
        batches: Iterator[Batch],
        total: int,
        window_bytes: int,
        progress: Progress | None,
        reply_timeout: float,
    ) -> None:
        self.connections = connections
        self.batches = batches
        self.total = total
        self.window_bytes = window_bytes
        self.progress = progress
        self.reply_timeout = reply_timeout
        self.exhausted = False
        self.commands = 0
        self.done = 0
        self.bytes_sent = 0
        self.last_progress = 0.0
        self.selector = selectors.DefaultSelector()

    def _refill(self, conn: _Connection) -> None:
        while not self.exhausted and (
            conn.inflight_bytes < self.window_bytes or not conn.inflight
        ):
            batch = next(self.batches, None)
            if batch is None:
                self.exhausted = True
                return
            conn.outgoing.append(memoryview(batch.payload))
            conn.inflight.append(_InFlight(batch=batch, replies_left=batch.commands))
            conn.inflight_bytes += len(batch.payload)

    def _send(self, conn: _Connection) -> None:
        while conn.outgoing:
            view = conn.outgoing[0]
            try:
                sent = conn.sock.send(view[: 1 << 20])
            except BlockingIOError:
                return
            except OSError as exc:
                raise BulkLoadError(f"{conn.name}: send failed: {exc}") from exc
            self.bytes_sent += sent
            if sent == len(view):
                conn.outgoing.popleft()
            else:
                conn.outgoing[0] = view[sent:]

    def _receive(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            raise BulkLoadError(f"{conn.name}: receive failed: {exc}") from exc
        if not data:
            pending = conn.inflight[0].batch.describe(0) if conn.inflight else "nothing"
            raise BulkLoadError(
                f"{conn.name}: server closed the connection (waiting for the reply to {pending})"
            )
        data = conn.partial + data
        if b"-" not in data and b"$" not in data and b"*" not in data:
            # fast path: only "+OK" / ":n" lines, just count them
            end = data.rfind(b"\r\n")
            if end < 0:
                conn.partial = data
                return
            conn.partial = data[end + 2 :]
            self._acknowledge(conn, data.count(b"\r\n"))
            return
        for line in _reply_lines(conn, data):
            kind = line[:1]
            if kind in (b"+", b":"):
                self._acknowledge(conn, 1)
                continue
            if not conn.inflight:
                raise BulkLoadError(f"{conn.name}: reply {line[:200]!r} to no command")
            head = conn.inflight[0]
            index = head.batch.commands - head.replies_left
            command = head.batch.describe(index)
            text = line[1:].decode(errors="replace")[:300]
            if kind == b"-":
                raise BulkLoadError(f"server error reply to {command}: {text}")
            raise BulkLoadError(f"unexpected reply {line[:80]!r} to {command}")

    def _acknowledge(self, conn: _Connection, replies: int) -> None:
        while replies > 0:
            if not conn.inflight:
                raise BulkLoadError(f"{conn.name}: more replies than commands sent")
            head = conn.inflight[0]
            used = min(replies, head.replies_left)
            head.replies_left -= used
            replies -= used
            self.commands += used
            if head.replies_left == 0:
                conn.inflight.popleft()
                conn.inflight_bytes -= len(head.batch.payload)
                self.done += head.batch.elements
        self._report(final=False)

    def _report(self, *, final: bool) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if final or now - self.last_progress >= 0.1:
            self.last_progress = now
            self.progress(self.done, self.total)

    def run(self) -> None:
        for conn in self.connections:
            self.selector.register(conn.sock, selectors.EVENT_READ, conn)
        last_activity = time.monotonic()
        self._report(final=True)
        while True:
            for conn in self.connections:
                self._refill(conn)
                self._send(conn)
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outgoing else 0)
                self.selector.modify(conn.sock, events, conn)
            if self.exhausted and not any(c.inflight for c in self.connections):
                break
            ready = self.selector.select(timeout=1.0)
            if ready:
                last_activity = time.monotonic()
            elif time.monotonic() - last_activity > self.reply_timeout:
                waiting = next(c for c in self.connections if c.inflight)
                raise BulkLoadError(
                    f"{waiting.name}: no reply for {self.reply_timeout:.0f} s to "
                    f"{waiting.inflight[0].batch.describe(0)}"
                )
            for key, mask in ready:
                conn = key.data
                if mask & selectors.EVENT_READ:
                    self._receive(conn)
                if mask & selectors.EVENT_WRITE:
                    self._send(conn)
        self._report(final=True)

    def close(self) -> None:
        self.selector.close()
        for conn in self.connections:
            conn.sock.close()


def bulk_load(
    batches: Iterable[Batch],
    *,
    host: str,
    port: int,
    total_elements: int,
    connections: int = 2,
    window_bytes: int = 4 << 20,
    progress: Progress | None = None,
    connect_timeout: float = 10.0,
    reply_timeout: float = 120.0,
) -> LoadStats:
    """Send every batch, check every reply; returns what was loaded and how fast.

    `progress(done, total)` is called with elements acknowledged by the server so far, at
    most ten times a second plus once at the start and once at the end.
    """
    if connections <= 0:
        raise ValueError(f"connections must be > 0, got {connections}")
    if window_bytes <= 0:
        raise ValueError(f"window_bytes must be > 0, got {window_bytes}")
    started = time.perf_counter()
    opened: list[_Connection] = []
    try:
        for index in range(connections):
            opened.append(_connect(host, port, connect_timeout, index))
    except BulkLoadError:
        for conn in opened:
            conn.sock.close()
        raise
    loader = _Loader(
        connections=opened,
        batches=iter(batches),
        total=total_elements,
        window_bytes=window_bytes,
        progress=progress,
        reply_timeout=reply_timeout,
    )
    try:
        loader.run()
    finally:
        loader.close()
    return LoadStats(
        commands=loader.commands,
        elements=loader.done,
        bytes_sent=loader.bytes_sent,
        seconds=time.perf_counter() - started,
    )
