"""redline.profile pieces that need no running server: folding, shares, comparisons, hotspots,
the unwinder choice (on programs compiled here) and perf stat parsing."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from redline.core.errors import UsageError
from redline.profile import (choose_unwinder, describe_move, fold_perf_script, format_hot_stacks_table,
                             format_hotspots_table, hotspots, moved_symbols, read_folded, symbol_shares,
                             write_folded)
from redline.profile.counters import parse_perf_stat_csv
from redline.profile.folding import frame_name

PERF_SCRIPT_SAMPLE = """\
redis-server 22156  1512.102315:    1001001 cpu-clock: 
\t             84c __vdso_gettimeofday+0x3c ([vdso])
\t           6e6a0 call+0x80 (/usr/bin/redis-check-rdb)
\t          13c333 [unknown] (/usr/bin/redis-check-rdb)
\t           61215 main+0x315 (/usr/bin/redis-check-rdb)
\t           27304 __libc_start_main@@GLIBC_2.34+0x84 (/usr/lib/x86_64-linux-gnu/libc.so.6)

redis-server 22156  1512.103315:    1001001 cpu-clock: 
\t           70712 __sin_fma+0x452 (/usr/lib/x86_64-linux-gnu/libm.so.6)
\t          120803 geohashGetDistance+0x33 (/usr/bin/redis-check-rdb)
\t           61215 main+0x315 (/usr/bin/redis-check-rdb)

redis-server 22156  1512.104315:    1001001 cpu-clock: 
\t           70799 __sin_fma+0x4e1 (/usr/lib/x86_64-linux-gnu/libm.so.6)
\t          120803 geohashGetDistance+0x33 (/usr/bin/redis-check-rdb)
\t           61215 main+0x315 (/usr/bin/redis-check-rdb)
redis-server 22156  1512.105315:    1001001 cpu-clock: 
\tffffffff8a2b3c4d tcp_sendmsg+0x1d ([kernel.kallsyms])
\t        7f00aa0123 [unknown] ([unknown])
"""


def test_fold_perf_script_counts_stacks_root_first():
    stacks = fold_perf_script(PERF_SCRIPT_SAMPLE.splitlines(keepends=True))
    assert stacks == {
        "__libc_start_main;main;[redis-check-rdb];call;__vdso_gettimeofday": 1,
        "main;geohashGetDistance;__sin_fma": 2,   # two addresses inside the same functions merge
        "[unknown];tcp_sendmsg_[k]": 1,            # kernel frames marked as flame graphs do                # a header without the blank separator still splits
    }


def test_frame_names_drop_offsets_versions_and_name_unresolved_frames_after_their_object():
    assert frame_name("geohashGetDistance+0x33", "/usr/bin/redis-check-rdb") == "geohashGetDistance"
    assert frame_name("__libc_start_main@@GLIBC_2.34+0x84", "libc.so.6") == "__libc_start_main"
    assert frame_name("[unknown]", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") == "[libjemalloc.so.2]"
    assert frame_name("[unknown]", "[unknown]") == "[unknown]"
    assert frame_name("tcp_sendmsg+0x1d", "[kernel.kallsyms]") == "tcp_sendmsg_[k]"
    assert frame_name("a;b", None) == "a:b"      # ';' separates frames in folded files


def test_folded_round_trip_gzip_and_plain(tmp_path):
    stacks = {"main;a;b": 7, "main;c": 3}
    gz = write_folded(stacks, tmp_path / "x.folded.gz")
    plain = write_folded(stacks, tmp_path / "x.folded")
    assert gzip.decompress(gz.read_bytes()).decode() == plain.read_text() == "main;a;b 7\nmain;c 3\n"
    assert read_folded(gz) == read_folded(plain) == stacks


def test_malformed_folded_file_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.folded"
    bad.write_text("main;a 3\nmain;b three\n")
    with pytest.raises(UsageError, match=r"bad\.folded:2: expected"):
        read_folded(bad)
    with pytest.raises(UsageError, match="cannot read folded stacks"):
        read_folded(tmp_path / "missing.folded")


def test_symbol_shares_self_and_total_count_recursion_once():
    shares = symbol_shares({"main;f;f;g": 2, "main;f": 1, "main;h": 1})
    assert shares.samples == 4
    assert shares.self_share == {"g": 0.5, "f": 0.25, "h": 0.25}
    assert shares.total_share == {"main": 1.0, "f": 0.75, "g": 0.5, "h": 0.25}
    assert shares.top_self(1) == [("g", 0.5)]
    assert symbol_shares({}).top_total() == []


def test_moved_symbols_ranks_by_size_of_change(tmp_path):
    base = write_folded({"main;geo;dist": 48, "main;geo": 40, "main;net": 12}, tmp_path / "a.folded.gz")
    comp = write_folded({"main;geo;dist": 12, "main;geo": 40, "main;net": 48}, tmp_path / "b.folded.gz")
    moves = moved_symbols(base, comp, top=5)
    assert [m["symbol"] for m in moves] == ["dist", "net"]     # "geo" did not move: left out
    assert moves[0] == {"symbol": "dist", "baseline_share": 0.48, "comparison_share": 0.12}
    assert describe_move(moves[0]) == "dist 48% → 12%"
    assert moved_symbols(base, comp, top=1) == moves[:1]
    with pytest.raises(UsageError):
        moved_symbols(base, comp, top=0)


def test_hotspots_weights_each_test_equally(tmp_path):
    # A long test with many samples must not drown a short one.
    long_run = write_folded({"main;set;memcpy": 9000, "main;set;[libc.so.6]": 1000}, tmp_path / "set.folded.gz")
    short_run = write_folded({"main;geo;sin": 30, "main;geo;[libc.so.6]": 70}, tmp_path / "geo.folded.gz")
    empty = write_folded({}, tmp_path / "idle.folded.gz")
    h = hotspots([long_run, short_run, empty], top=10)
    assert h.tests == ["set", "geo", "idle"]
    by_symbol = {s.symbol: s for s in h.symbols}
    assert h.profiled == 2                                     # the idle test neither weighs nor dilutes
    assert by_symbol["memcpy"].share == pytest.approx(0.9 / 2)
    assert by_symbol["[libc.so.6]"].share == pytest.approx((0.1 + 0.7) / 2)
    assert by_symbol["[libc.so.6]"].tests == 2 and by_symbol["[libc.so.6]"].peak_test == "geo"
    assert [s.symbol for s in h.symbols] == ["memcpy", "[libc.so.6]", "sin"]
    assert h.stacks[0].stack == "main;set;memcpy" and h.stacks[0].share == pytest.approx(0.45)
    console = Console(width=160, record=True)
    console.print(format_hotspots_table(h))
    console.print(format_hot_stacks_table(h))
    text = console.export_text()
    assert "memcpy" in text and "[libc.so.6]" in text and "40.0%" in text and "geo (70.0%)" in text
    assert "2/2" in text and "1 without samples left out" in text
    assert hotspots([empty]).symbols == []
    with pytest.raises(UsageError):
        hotspots([])


def test_hotspots_names_tests_by_folder_when_files_share_a_name(tmp_path):
    files = []
    for test in ("a", "b"):
        (tmp_path / test).mkdir()
        files.append(write_folded({"main;x": 1}, tmp_path / test / "profile.folded.gz"))
    assert hotspots(files).tests == ["a/profile", "b/profile"]


def test_perf_stat_csv_parsing_skips_unsupported_events():
    text = ("# started on Sun Nov 22 07:53:11 2026\n\n"
            "1200000,,instructions,1450261,100.00,,\n"
            "<not supported>,,cycles,0,100.00,,\n"
            "1.45,msec,task-clock,1450261,100.00,0.001,CPUs utilized\n")
    assert parse_perf_stat_csv(text) == {"instructions": 1200000.0, "task-clock": 1.45}


C_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
volatile double sink;
__attribute__((noinline)) double inner(double x) {
    double s = 0; for (int i = 0; i < 2000; i++) s += sin(x + i) * cos(x - i);
    return s;
}
__attribute__((noinline)) double middle(double x) {
    double s = 0;
    for (int i = 0; i < 20000; i++) s += sqrt(x * i + 1.0) / (i + 1.5);
    return s + inner(s);
}
__attribute__((noinline)) double outer(double x) {
    double s = 0; for (int i = 0; i < 10; i++) s += middle(x + i);
    return s;
}
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    time_t end = time(NULL) + (time_t)seconds;
    while (time(NULL) < end) sink = outer(sink);
    printf("%f\n", sink);
    return 0;
}
"""


def compile_c(tmp_path: Path, name: str, flags: list[str]) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed (Debian package build-essential, installed by setup.sh)")
    source = tmp_path / "busy.c"
    source.write_text(C_PROGRAM)
    binary = tmp_path / name
    subprocess.run(["gcc", *flags, str(source), "-o", str(binary), "-lm"], check=True, timeout=120)
    return binary


def test_unwinder_follows_how_the_binary_was_built(tmp_path):
    with_fp = choose_unwinder(compile_c(tmp_path, "fp", ["-O2", "-g", "-fno-omit-frame-pointer"]))
    without = choose_unwinder(compile_c(tmp_path, "nofp", ["-O2"]))
    assert with_fp.unwinder == "fp" and with_fp.frame_pointer_share >= 0.5
    assert without.unwinder == "dwarf" and without.frame_pointer_share < 0.5
    assert "frame pointer" in without.reason


def test_unwinder_of_debian_redis_is_dwarf():
    server = Path("/usr/bin/redis-server")
    choice = choose_unwinder(server)
    assert choice.unwinder == "dwarf", choice.reason


def test_unwinder_rejects_non_elf(tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(UsageError, match="not an ELF binary"):
        choose_unwinder(script)


def test_profile_differences_are_keyed_as_comparisons_name_the_test(tmp_path):
    # a test on a topology other than standalone: its comparisons say "t@topology", so must its moved symbols
    from redline.analysis.comparison import profile_differences
    from redline.core.run import Run
    folded = {}
    for side, stacks in (("baseline", "main;call;getCommand 10\nmain;aeMain 90\n"),
                         ("comparison", "main;call;getCommand 60\nmain;aeMain 40\n")):
        folded[side] = tmp_path / f"{side}.folded"
        folded[side].write_text(stacks)
    runs = [Run(test="t", target=side, side=side, run_index=0, status="ok", purpose="profile",
                topology="oss-standalone-02-io-threads", profile={"folded_path": str(path), "samples": 100})
            for side, path in folded.items()]
    found = profile_differences(runs, tmp_path / "artifacts")
    assert list(found) == ["t@oss-standalone-02-io-threads"]
    moved, svg = found["t@oss-standalone-02-io-threads"]
    assert "getCommand" in [m["symbol"] for m in moved] and Path(svg).is_file()
