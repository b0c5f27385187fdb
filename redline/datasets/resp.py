"""RESP request bytes built in bulk with numpy, and the `Batch` unit the bulk loader sends.

Numbers are written with a fixed width (zero padded) so that a whole chunk of GEOADD
arguments is one uint8 matrix filled column by column; no per-element Python formatting.
Coordinates are written as integer micro-degrees with a sign-or-zero first character, e.g.
longitude 7.25 -> "0007.250000", latitude -33.5 -> "-33.500000"; the server parses these
with strtod like any other float argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

_CRLF = b"\r\n"


@dataclass(frozen=True)
class Batch:
    """Pipelined commands sent as one block of bytes.

    `describe(i)` names the i-th command (0-based) for error messages; `elements` is what
    the batch adds (members or keys), counted by progress reports once all replies are in.
    """

    payload: bytes
    commands: int
    elements: int
    describe: Callable[[int], str]


def encode_command(*args: bytes | str | int) -> bytes:
    """One command in RESP (array of bulk strings)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


# ASCII of 000..999, three bytes a row: digits are looked up three at a time.
_THREE_DIGITS = np.array(
    [[48 + i // 100, 48 + i // 10 % 10, 48 + i % 10] for i in range(1000)], dtype=np.uint8
)


def decimal_digits(values: np.ndarray, width: int) -> np.ndarray:
    """ASCII digits of non-negative integers, zero padded to `width`: uint8 (n, width)."""
    values = np.asarray(values, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() >= 10**width):
        raise ValueError(f"values do not fit in {width} decimal digits")
    groups = (width + 2) // 3
    out = np.empty((values.shape[0], groups * 3), dtype=np.uint8)
    rest = values
    for group in range(groups - 1, -1, -1):
        out[:, group * 3 : group * 3 + 3] = _THREE_DIGITS[rest % 1000]
        rest = rest // 1000
    return out[:, groups * 3 - width :]


def _fixed_decimal(micro: np.ndarray, int_digits: int) -> np.ndarray:
    """sign-or-zero, int_digits digits, '.', 6 digits: uint8 (n, int_digits + 8)."""
    out = np.empty((micro.shape[0], int_digits + 8), dtype=np.uint8)
    magnitude = np.abs(micro)
    out[:, 0] = np.where(micro < 0, ord("-"), ord("0"))
    out[:, 1 : 1 + int_digits] = decimal_digits(magnitude // 1_000_000, int_digits)
    out[:, 1 + int_digits] = ord(".")
    out[:, 2 + int_digits :] = decimal_digits(magnitude % 1_000_000, 6)
    return out


def _bulk(text: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(text), text)


def geoadd_batches(
    *,
    key: str,
    first_member: int,
    lon_e6: np.ndarray,
    lat_e6: np.ndarray,
    members_per_command: int,
) -> Iterator[Batch]:
    """GEOADD key lon lat member ... for consecutive numeric members, one Batch per command.

    Members are the decimal numbers first_member, first_member + 1, ...
    """
    if members_per_command <= 0:
        raise ValueError(f"members_per_command must be > 0, got {members_per_command}")
    if lon_e6.shape != lat_e6.shape:
        raise ValueError("lon and lat arrays differ in length")
    n = int(lon_e6.shape[0])
    if n == 0:
        return
    lon_text = _fixed_decimal(lon_e6, 3)  # 11 bytes
    lat_text = _fixed_decimal(lat_e6, 2)  # 10 bytes
    head = _bulk(b"GEOADD") + _bulk(key.encode())
    start = 0
    while start < n:
        member = first_member + start
        digits = len(str(member))
        # the run of members with this many digits, within this chunk
        run_end = min(n, 10**digits - first_member)
        prefix = b"$11\r\n"
        mid = b"\r\n$10\r\n"
        member_head = b"\r\n$%d\r\n" % digits
        layout = [
            (prefix, None),
            (None, "lon"),
            (mid, None),
            (None, "lat"),
            (member_head, None),
            (None, "member"),
            (_CRLF, None),
        ]
        width = len(prefix) + 11 + len(mid) + 10 + len(member_head) + digits + 2
        rows = np.empty((run_end - start, width), dtype=np.uint8)
        col = 0
        for constant, field in layout:
            if constant is not None:
                rows[:, col : col + len(constant)] = np.frombuffer(constant, dtype=np.uint8)
                col += len(constant)
            elif field == "lon":
                rows[:, col : col + 11] = lon_text[start:run_end]
                col += 11
            elif field == "lat":
                rows[:, col : col + 10] = lat_text[start:run_end]
                col += 10
            else:
                numbers = np.arange(member, member + (run_end - start), dtype=np.int64)
                rows[:, col : col + digits] = decimal_digits(numbers, digits)
                col += digits
        for offset in range(0, run_end - start, members_per_command):
            count = min(members_per_command, run_end - start - offset)
            low = member + offset
            payload = (
                b"*%d\r\n" % (2 + 3 * count) + head + rows[offset : offset + count].tobytes()
            )
            yield Batch(
                payload=payload,
                commands=1,
                elements=count,
                describe=lambda _i, low=low, count=count: (
                    f"GEOADD {key} <{count} points: members {low}..{low + count - 1}>"
                ),
            )
        start = run_end


def set_batches(
    *,
    key_prefix: str,
    first_index: int,
    count: int,
    value: bytes,
    commands_per_batch: int,
) -> Iterator[Batch]:
    """SET <prefix><i> <value> for i = first_index .. first_index + count - 1."""
    if commands_per_batch <= 0:
        raise ValueError(f"commands_per_batch must be > 0, got {commands_per_batch}")
    prefix = key_prefix.encode()
    value_part = _bulk(value)
    index = first_index
    end = first_index + count
    while index < end:
        digits = len(str(index))
        run_end = min(end, 10**digits)
        key_len = len(prefix) + digits
        head = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s" % (key_len, prefix)
        tail = _CRLF + value_part
        width = len(head) + digits + len(tail)
        for low in range(index, run_end, commands_per_batch):
            high = min(low + commands_per_batch, run_end)
            rows = np.empty((high - low, width), dtype=np.uint8)
            rows[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
            rows[:, len(head) : len(head) + digits] = decimal_digits(
                np.arange(low, high, dtype=np.int64), digits
            )
            rows[:, len(head) + digits :] = np.frombuffer(tail, dtype=np.uint8)
            yield Batch(
                payload=rows.tobytes(),
                commands=high - low,
                elements=high - low,
                describe=lambda i, low=low: f"SET {key_prefix}{low + i} <{len(value)} bytes>",
            )
        index = run_end
