"""`redline report` and `--html`: sessions made by real `redline run` / `compare` on Debian's
redis-server, opened in headless Chromium (tests/chromium_cdp.py): no console error, no request
leaving the file, every section there, every plot drawn, flame graphs searchable and zoomable in
their frames, screenshots taken (kept under the test's tmp directory; REDLINE_SCREENSHOTS=DIR
copies them there to look at)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from chromium_cdp import Browser
from redline.core import metrics
from redline.analysis.comparison import TestComparison as Comparison
from redline.output.html.page import Page
from redline.output.verdicts import WORDS
from redline.analysis.stats import compare_metric

FAST = ("--duration", "1s", "--warmup", "0s")
TESTS = "string-get-100B-pipeline-10$|string-set-100B-pipeline-10$"
OPENED = "document.body.dataset.firstScreenMs"


def keep(png: Path) -> None:
    where = os.environ.get("REDLINE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(where) / png.name)


def check_page(browser: Browser, html: Path, sections: list[str], shots: dict[str, str], out: Path) -> dict:
    """Open `html`, check what a reader cannot see, draw every plot; returns what it found."""
    seconds = browser.open_page(html, ready=OPENED)
    ids = browser.evaluate("[...document.querySelectorAll('section')].map(s => s.id)")
    for section in sections:
        assert section in ids, (section, ids)
    plots = browser.evaluate("[...document.querySelectorAll('.plot')].map(p => p.id)")
    for plot in plots:                       # scrolled to, each one is drawn by plotly
        browser.show(f"#{plot}")
        assert browser.evaluate(f"!!document.querySelector('#{plot} .main-svg')"), plot
    for name, selector in shots.items():
        browser.show(selector)
        keep(browser.screenshot(out / f"{name}.png"))
        assert (out / f"{name}.png").stat().st_size > 10_000
    browser.pump(0.5)
    assert not browser.observed.console_errors, browser.observed.console_errors
    assert not browser.observed.requests_leaving(html.resolve().as_uri()), browser.observed.requests
    return {"seconds": seconds, "plots": plots, "sections": ids}


@pytest.fixture(scope="module")
def browser():
    with Browser(height=1000) as b:
        yield b


def test_run_report_from_run_html(tmp_path, redline_cli, browser):
    html, db = tmp_path / "run.html", tmp_path / "r.db"
    redline_cli("run", "quick", "--name", TESTS, "--runs", "2", "--duration", "1s", "--warmup", "1s", "--profile",
                "--store", db, "--html", html, check_exit=0, timeout=600)
    text = html.read_text()
    assert "<script src" not in text and "<link" not in text      # nothing to fetch
    found = check_page(browser, html, ["summary", "warnings", "test-1", "test-2"],
                       {"run-test": "#test-1", "run-summary": "#summary"}, tmp_path)
    assert len(found["plots"]) == 4                     # per test: every run's spread and the timeline
    # the numbers are the stored ones
    rows = sqlite3.connect(db).execute(
        "SELECT r.test, m.value FROM runs r JOIN metrics m ON m.run_id=r.id WHERE m.name='ops_per_sec' "
        "AND r.purpose='measure' AND r.status='ok'").fetchall()
    figures = json.loads(browser.evaluate("document.getElementById('redline-figures').textContent"))
    spread = figures[found["plots"][0]]["data"][0]["y"]
    assert sorted(spread) == sorted(v for t, v in rows if t.endswith("get-100B-pipeline-10"))
    # the warm-up (1 s, not recorded) is shaded before the measured window
    timeline = figures[found["plots"][1]]["layout"]
    assert timeline["shapes"] and timeline["shapes"][0]["x0"] == -1.0
    # a flame graph, opened, still searches and zooms inside its frame
    browser.show("details.flame[open]")
    browser.wait_for("document.querySelector('details.flame[open] iframe')")
    browser.pump(1.0)
    assert browser.evaluate_in_frame("blob:", "document.getElementById('frames').children.length") > 20
    assert browser.evaluate_in_frame("blob:", "search('dict'); document.getElementById('matched').textContent") \
        .startswith("Matched:")
    assert browser.evaluate_in_frame("blob:", """
        var g = [...document.querySelectorAll('#frames > g')].find(g => g.querySelector('title').textContent
                                                                  .startsWith('main'));
        g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        !document.getElementById('unzoom').classList.contains('hide')""")
    keep(browser.screenshot(tmp_path / "run-flamegraph.png"))
    browser.pump(0.3)
    assert not browser.observed.console_errors, browser.observed.console_errors


def test_compare_report_says_what_compare_said(tmp_path, redline_cli, browser):
    html, db, md = tmp_path / "cmp.html", tmp_path / "c.db", tmp_path / "cmp.md"
    proc = redline_cli("compare", "quick", "--name", TESTS, "--comparison-config", "appendonly=yes", "--runs", "5",
                       "--max-runs", "5", *FAST, "--profile", "--store", db, "--markdown", md, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    redline_cli("report", "latest", "--store", db, "-o", html, check_exit=0)
    found = check_page(browser, html, ["verdicts", "summary", "warnings", "test-1", "test-2"],
                       {"compare-verdicts": "#verdicts", "compare-test": "#test-2"}, tmp_path)
    assert len(found["plots"]) == 1 + 2 * 3             # the forest; per test: interleaved, spread, timeline
    stored = [json.loads(d) for (d,) in sqlite3.connect(db).execute("SELECT detail FROM comparisons")]
    page = browser.evaluate("document.getElementById('verdicts').innerText")
    assert md.read_text().splitlines()[0].replace("**", "") in page     # the markdown comment's summary sentence
    forest = json.loads(browser.evaluate("document.getElementById('redline-figures').textContent"))[found["plots"][0]]
    points = {(y, x) for trace in forest["data"][1:] for y, x in zip(trace["y"], trace["x"])}
    judged = [d for d in stored if d["delta_pct"] is not None]
    assert len(points) == len(judged)                   # every test × metric with a result, once
    for d in judged:
        label = f"{d['test']} · {metrics.BY_NAME[d['metric']].label}"
        assert (label, d["delta_pct"]) in points
    for d in stored:                                    # the verdict words, as stored
        assert WORDS[d["verdict"]] in page
    # the differential flame graph of each test is in the page
    assert browser.evaluate("document.querySelectorAll('details.flame').length") == 2 * 3


def test_history_report_marks_the_change_points_redline_history_finds(tmp_path, redline_cli, browser):
    """A planted change: the same bin: path, its wrapper starting the server under valgrind's
    memcheck from session 5 on: some 25 times the CPU per SET, a step no loaded machine's
    session-to-session noise can hide (an fsynced AOF, +60% to +100%, was lost in it more than once;
    valgrind's `none` tool, 3 times, came close to it). Four sessions on each side: with two, that
    noise is estimated on too few degrees of freedom."""
    db, wrapper = tmp_path / "h.db", tmp_path / "redis-server"
    for launcher in ("", "", "", "", *["valgrind --tool=memcheck --quiet"] * 4):
        wrapper.write_text(f'#!/bin/sh\nexec {launcher} /usr/bin/redis-server "$@"\n')
        wrapper.chmod(0o755)
        redline_cli("run", "quick", "--name", "string-set-100B-pipeline-10$", "--target", f"bin:{wrapper}",
                    "--runs", "3", *FAST, "--store", db, check_exit=0, timeout=600)
    html, document = tmp_path / "history.html", tmp_path / "history.json"
    metric = "server_cpu_us_per_op"
    redline_cli("history", "--metric", metric, "--store", db, "--json", document, check_exit=0)
    redline_cli("report", "--history", "--metric", metric, "--store", db, "-o", html, check_exit=0)
    found = check_page(browser, html, ["overview", "series-1"], {"history": "#series-1"}, tmp_path)
    expected = json.loads(document.read_text())["series"][0]
    # the planted change itself: one change point, at the first session under valgrind
    sessions = [[round(v, 2) for v in p["runs"]] for p in expected["points"]]
    assert [cp["index"] for cp in expected["change_points"]] == [4], (expected["change_points"], sessions)
    figure = json.loads(browser.evaluate("document.getElementById('redline-figures').textContent"))[found["plots"][0]]
    dashed = [s for s in figure["layout"]["shapes"] if s["line"].get("dash") == "dash"]
    assert len(dashed) == len(expected["change_points"]) == 1
    for shape, cp in zip(dashed, expected["change_points"]):
        assert shape["x0"] == cp["index"] - 0.5
        assert f"p {cp['p_value']:.2g}" in " ".join(a["text"] for a in figure["layout"]["annotations"])
    runs = sorted(v for p in expected["points"] for v in p["runs"])
    assert sorted(figure["data"][0]["y"]) == runs
    assert "sha256" in " ".join(figure["data"][0]["hovertext"])          # hover names the build


def test_the_browser_checks_can_fail(tmp_path, browser):
    """A page that fetches something and logs an error is caught by the same checks."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                   '<script src="https://cdn.example.invalid/plotly.js"></script>'
                   '<script>console.error("boom"); document.body.dataset.firstScreenMs = "1";</script></body></html>')
    browser.open_page(bad, ready=OPENED)
    browser.pump(1.0)
    leaving = browser.observed.requests_leaving(bad.resolve().as_uri())
    assert "http://127.0.0.1:9/x.png" in leaving and any("example.invalid" in url for url in leaving)
    assert any("boom" in e for e in browser.observed.console_errors)


def test_report_usage_errors_are_one_line_before_anything(tmp_path, redline_cli):
    db = tmp_path / "r.db"
    proc = redline_cli("report", "--store", db, "-o", tmp_path / "x.html")
    assert proc.returncode == 2 and "no result store" in proc.stderr and "Traceback" not in proc.stderr
    proc = redline_cli("report", "3", "--history", "-o", tmp_path / "x.html")
    assert proc.returncode == 2 and "exclude each other" in proc.stderr
    proc = redline_cli("report", "--metric", "p99_ms", "-o", tmp_path / "x.html")
    assert proc.returncode == 2 and "--history" in proc.stderr
    proc = redline_cli("report", "-o", tmp_path / "missing" / "x.html")
    assert proc.returncode == 2 and "cannot write there" in proc.stderr
    proc = redline_cli("run", "quick", "--store", db, "--html", db)
    assert proc.returncode == 2 and "result store" in proc.stderr and not db.exists()
    proc = redline_cli("run", "quick", "--store", db, "--json", tmp_path / "a", "--html", tmp_path / "a")
    assert proc.returncode == 2 and "the same file" in proc.stderr


def test_text_from_suites_and_servers_cannot_close_a_script_or_add_markup():
    page = Page("t </script><script>alert(1)</script>")
    page.section("s", "<b>name</b>", "")
    page.figure({"data": [{"type": "scatter", "x": [1], "y": [1], "name": "</script><script>alert(2)</script>"}],
                 "layout": {}}, height=100)
    html = page.render()
    assert html.count("</script>") == 3                 # the figures, plotly, the page's script: no other closes
    assert "<b>name</b>" not in html and "&lt;b&gt;name&lt;/b&gt;" in html and "<title>t &lt;/script&gt;" in html


def test_a_stored_comparison_reads_back_as_the_one_compare_printed():
    result = compare_metric([100, 101, 99, 100, 102], [120, 121, 119, 122, 118], paired=True, higher_is_better=False)
    c = Comparison("t", "p99_ms", result, survives_fdr=True, comparisons_in_session=5,
                       moved_symbols=[{"symbol": "f", "baseline_share": 0.1, "comparison_share": 0.2}],
                       state_flags=["used_memory differs"])
    assert Comparison.from_json(json.loads(json.dumps(c.as_json()))) == c
    empty = Comparison("t", "p99_ms", None, note="too few successful runs")
    assert Comparison.from_json(empty.as_json()) == empty
