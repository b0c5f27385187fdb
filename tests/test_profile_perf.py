"""redline.profile against real processes: Debian's redis-server under GEOSEARCH BYBOX load,
perf record with DWARF unwinding, the flame graph rendered by headless Chromium, a differential
graph, hotspots, and frame-pointer unwinding of a program compiled here."""

from __future__ import annotations

import random
import shutil
import socket
import struct
import subprocess
import sys
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from rich.console import Console

from redline.core.errors import RunError
from redline.profile import (Recorder, diff_flamegraph, format_hotspots_table, hotspots, moved_symbols,
                             read_folded)

REDIS_SERVER = "/usr/bin/redis-server"
GEO_QUERY = ["GEOSEARCH", "geo", "FROMLONLAT", "7.0", "55.0", "BYBOX", "200", "200", "KM"]
GEO_DISTANCE = ("geohashGetDistance", "geohashGetDistanceIfInRectangle", "geohashGetDistanceIfInRadius")
TRIGONOMETRY = ("sin", "cos", "asin", "atan", "atan2")
WINDOW_S = 3.0



def is_geo_or_trig(symbol: str) -> bool:
    """geohashGetDistance*, or a libm trigonometric function (glibc names them __sin_fma, …)."""
    if symbol.startswith("geohashGetDistance"):
        return True
    bare = symbol.lstrip("_").removeprefix("ieee754_")
    return bare.split("_")[0] in TRIGONOMETRY


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def redis_server(tmp_path: Path):
    port = free_port()
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"redis-server on port {port} did not answer")
        yield proc, port, client
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def load_geo_points(client: redis.Redis, port: int) -> None:
    """The generated OpenStreetMap-like geo key when redline.datasets offers it, else 150K points
    dense around the query centre (a 200 km box then holds thousands of them)."""
    try:
        from redline.datasets import lookup  # type: ignore[attr-defined]
    except ImportError:
        lookup = None
    if lookup is not None:
        lookup("1key-geo-60M-elements").load(host="127.0.0.1", port=port, scale=0.002)
        key = next(iter(client.scan_iter(count=10)))
        if key != b"geo":
            client.rename(key, "geo")
        return
    rnd = random.Random(6)
    for batch in range(150):
        args: list = []
        for i in range(1000):
            args += [rnd.uniform(2.0, 12.0), rnd.uniform(52.0, 58.0), f"p{batch}:{i}"]
        client.execute_command("GEOADD", "geo", *args)


@contextmanager
def benchmark_load(port: int, command: list[str]):
    """redis-benchmark sending `command` from 4 connections until stopped (bounded by -n)."""
    proc = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "4",
                             "-n", "50000000", "-q", *command],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        assert proc.poll() is None, "redis-benchmark exited early"
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def profile_window(*, pid: int, workdir: Path, title: str):
    recorder = Recorder(pids=[pid], binary=None, workdir=workdir, title=title)
    recorder.start()
    try:
        time.sleep(WINDOW_S)
    except BaseException:
        recorder.abort()
        raise
    return recorder.stop()


@pytest.fixture(scope="module")
def geo_and_set_profiles(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("profile")
    with redis_server(tmp) as (proc, port, client):
        load_geo_points(client, port)
        assert client.zcard("geo") > 50_000
        assert len(client.execute_command(*GEO_QUERY)) >= 10
        with benchmark_load(port, GEO_QUERY):
            geo = profile_window(pid=proc.pid, workdir=tmp / "geo", title="GEOSEARCH BYBOX 200 km")
        with benchmark_load(port, ["SET", "key:__rand_int__", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]):
            set_profile = profile_window(pid=proc.pid, workdir=tmp / "set", title="SET")
    return geo, set_profile


def test_geosearch_profile_top_self_symbols_are_geo_distance_and_trigonometry(geo_and_set_profiles):
    geo, _ = geo_and_set_profiles
    assert geo.unwinder == "dwarf"            # Debian's redis is built without frame pointers
    assert geo.event in ("cycles", "cpu-clock")
    assert geo.samples >= 200, f"too few samples ({geo.samples}) to judge"
    top_names = [symbol for symbol, _ in geo.top_self]
    assert any(s.startswith("geohashGetDistance") for s in top_names), top_names
    assert any(is_geo_or_trig(s) and not s.startswith("geohash") for s in top_names), top_names
    geo_share = sum(share for symbol, share in geo.top_self if is_geo_or_trig(symbol))
    assert geo_share >= 0.10, geo.top_self
    # DWARF unwinding reaches the command: the geo path is under georadiusGeneric, under main.
    stacks = read_folded(geo.folded_path)
    under_command = sum(c for s, c in stacks.items() if ";georadiusGeneric;" in s and s.startswith("_start;"))
    assert under_command / geo.samples > 0.5
    assert dict(geo.top_total)["georadiusGeneric"] > 0.5
    # shares are consistent with the folded file
    assert sum(stacks.values()) == geo.samples
    assert geo.folded_path.name.endswith(".folded.gz")


def test_profile_json_records_unwinder_event_and_counters(geo_and_set_profiles):
    geo, _ = geo_and_set_profiles
    data = geo.as_json()
    assert data["unwinder"] == "dwarf" and "frame pointer" in data["unwinder_reason"]
    assert data["event"] == geo.event and data["samples"] == geo.samples
    assert data["top_self"][0]["share"] >= data["top_self"][-1]["share"]
    if geo.counters is None:
        assert data["counters"] is None and data["counters_unavailable_reason"]
    else:
        assert geo.counters["instructions"] > 0 and geo.counters["cycles"] > 0 and geo.counters["ipc"] > 0
    assert not (geo.folded_path.parent / "perf.data").exists()   # raw data removed after folding


def test_flame_graph_svg_names_the_functions_and_is_interactive(geo_and_set_profiles):
    geo, _ = geo_and_set_profiles
    svg = geo.svg_path.read_text()
    assert "<script" in svg and "<title>" in svg           # hover titles and click-to-zoom code
    assert "geohashGetDistance" in svg
    assert any(f"{name}_" in svg or f"{name} (" in svg for name in ("__sin", "__cos")), "no sin/cos frame"


def decode_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, unfiltered."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = header[:4]
    assert depth == 8 and colour in (2, 6), f"unexpected PNG format depth={depth} colour={colour}"
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * bpp, [], bytes(width * bpp)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, up_left = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def screenshot(svg: Path, png: Path, user_data_dir: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed (setup.sh installs it)"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", f"--user-data-dir={user_data_dir}", f"--screenshot={png}",
                    "--window-size=1200,800", svg.resolve().as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert png.exists() and png.stat().st_size > 0, "chromium wrote no screenshot"


def flame_pixels(png: Path) -> tuple[float, int]:
    """(share of pixels in inferno's 'hot' frame colours, distinct colours)."""
    width, height, rows = decode_png(png)
    bpp = len(rows[0]) // width
    hot = 0
    colours = set()
    for row in rows[::4]:
        for x in range(0, width, 2):
            r, g, b = row[x * bpp:x * bpp + 3]
            colours.add((r, g, b))
            hot += r >= 200 and b <= 60          # frames: red 205-255, blue 0-55; background is grey/pale
    return hot / (len(rows[::4]) * len(range(0, width, 2))), len(colours)


def test_flame_graph_renders_in_headless_chromium(geo_and_set_profiles, tmp_path):
    geo, _ = geo_and_set_profiles
    png = tmp_path / "flamegraph.png"
    screenshot(geo.svg_path, png, tmp_path / "chromium-profile")
    hot_share, colours = flame_pixels(png)
    assert colours > 30, f"screenshot looks blank ({colours} colours)"
    assert hot_share > 0.05, f"only {hot_share:.1%} of the screenshot shows flame-graph frames"
    shutil.copy(png, geo.svg_path.with_suffix(".png"))   # kept next to the SVG for a person to look at


def test_blank_page_fails_the_screenshot_check(tmp_path):
    """The pixel check must be able to fail: an SVG without frames is not a flame graph."""
    blank = tmp_path / "blank.svg"
    blank.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="800">'
                     '<rect width="1200" height="800" fill="#eeeeee"/></svg>')
    png = tmp_path / "blank.png"
    screenshot(blank, png, tmp_path / "chromium-profile")
    hot_share, colours = flame_pixels(png)
    assert hot_share < 0.01 and colours < 30


def test_differential_graph_and_moved_symbols_between_set_and_geosearch(geo_and_set_profiles, tmp_path):
    geo, set_profile = geo_and_set_profiles
    assert set_profile.samples >= 100
    assert not any(s.startswith("geohash") for s, _ in set_profile.top_self)
    out = diff_flamegraph(set_profile.folded_path, geo.folded_path, tmp_path / "diff.svg")
    svg = out.read_text()
    assert "<script" in svg and "geohashGetDistance" in svg
    moves = moved_symbols(set_profile, geo, top=5)
    assert len(moves) == 5
    changes = [abs(m["comparison_share"] - m["baseline_share"]) for m in moves]
    assert changes == sorted(changes, reverse=True)
    # the geo work appeared in B; which move is largest depends on how much of SET's time the kernel
    # took on this machine (shares sum to 1: a big kernel share in A can fall by more than any one
    # geo symbol rises)
    geo_moves = [m for m in moves if m["symbol"].startswith("geo") or is_geo_or_trig(m["symbol"])]
    assert geo_moves and all(m["comparison_share"] > m["baseline_share"] for m in geo_moves)


def test_hotspots_over_real_profiles_prints_a_ranked_table(geo_and_set_profiles):
    geo, set_profile = geo_and_set_profiles
    h = hotspots([geo.folded_path, set_profile.folded_path], names=["geosearch", "set"], top=15)
    shares = [s.share for s in h.symbols]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0 + 1e-9
    geo_symbols = [s for s in h.symbols if s.symbol.startswith("geohash") or is_geo_or_trig(s.symbol)]
    assert geo_symbols and all(s.peak_test == "geosearch" for s in geo_symbols)
    console = Console(width=200, record=True)
    console.print(format_hotspots_table(h))
    text = console.export_text()
    assert "Hot symbols across 2 tests" in text and geo_symbols[0].symbol in text


BUSY_C = r"""
#include <math.h>
#include <stdlib.h>
#include <time.h>
volatile double sink;
__attribute__((noinline)) double middle(double x) {
    double s = 0;
    for (int i = 0; i < 200000; i++) s += sqrt(x * i + 1.0) / (i + 1.5) + (double)(i % 7) * 0.5;
    return s;
}
__attribute__((noinline)) double outer(double x) {
    double s = 0; for (int i = 0; i < 10; i++) s += middle(x + i) * 0.25 + (double)i;
    return s;
}
int main(int argc, char **argv) {
    time_t end = time(NULL) + atoi(argv[1]);
    while (time(NULL) < end) sink = outer(sink);
    return 0;
}
"""


def test_frame_pointer_build_is_recorded_with_frame_pointer_unwinding(tmp_path):
    source = tmp_path / "busy.c"
    source.write_text(BUSY_C)
    binary = tmp_path / "busy"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", str(source), "-o", str(binary), "-lm"],
                   check=True, timeout=120)
    proc = subprocess.Popen([str(binary), "30"])
    try:
        result = profile_window(pid=proc.pid, workdir=tmp_path / "profile", title="busy")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert result.unwinder == "fp", result.unwinder_reason
    assert result.samples >= 100
    stacks = read_folded(result.folded_path)
    chained = sum(c for s, c in stacks.items() if "main;outer;middle" in s)
    assert chained / result.samples > 0.5, stacks.most_common(5)


def test_recorder_reports_missing_process(tmp_path):
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(RunError, match=f"process {proc.pid} does not exist"):
        Recorder(pids=[proc.pid], binary=None, workdir=tmp_path)
    with pytest.raises(RunError, match="at least one"):
        Recorder(pids=[], binary=None, workdir=tmp_path)


def test_a_prepared_recorder_records_the_window_only(tmp_path):
    """prepare() attaches perf with its events off (attaching took over a second on a busy machine,
    which a 1-second window lost); nothing of the 3 busy seconds before start() is sampled."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        recorder = Recorder(pids=[busy.pid], binary=None, workdir=tmp_path / "busy", title="busy loop")
        recorder.prepare()
        time.sleep(3.0)                       # busy, perf attached, events off
        recorder.start()
        time.sleep(0.5)
        profile = recorder.stop()
    finally:
        busy.kill()
        busy.wait()
    assert profile.samples > 0
    # a sample per 1/frequency of the loop's CPU time at most; the 3 s before start() would triple it
    assert profile.samples <= profile.frequency_hz * (profile.window_s + 0.5), (profile.samples, profile.window_s)


def test_two_server_processes_are_recorded_together(tmp_path):
    """Cluster topologies profile several servers at once (perf record -p A,B)."""
    with redis_server(tmp_path) as (first, first_port, _), redis_server(tmp_path) as (second, second_port, _):
        with benchmark_load(first_port, ["SET", "a", "1"]), benchmark_load(second_port, ["INCR", "counter"]):
            recorder = Recorder(pids=[first.pid, second.pid], binary=None, workdir=tmp_path / "both",
                                title="two servers", keep_perf_data=True)
            recorder.start()
            time.sleep(2.0)
            profile = recorder.stop()
        incr_calls = int(redis.Redis(port=second_port).get("counter"))
    assert incr_calls > 0
    assert profile.pids == [first.pid, second.pid] and profile.samples >= 100
    script = subprocess.run(["perf", "script", "-i", str(tmp_path / "both" / "perf.data"), "-F", "pid"],
                            capture_output=True, text=True, timeout=120, check=True).stdout
    per_pid = {pid: script.split().count(str(pid)) for pid in (first.pid, second.pid)}
    assert sum(per_pid.values()) == profile.samples        # every sample belongs to one of the two
    assert all(count >= 20 for count in per_pid.values()), per_pid
