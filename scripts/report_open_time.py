"""How big an HTML report is and how long Chromium takes to open it.

Usage: .venv/bin/python scripts/report_open_time.py REPORT.html [--times 5]

Opens the file in headless Chromium (Debian's) --times times, each in a fresh browser (a cold
opening), and prints per opening, on the page's own clock from navigation start: the first
text on screen (first-contentful-paint) and the first screen complete (plotly unpacked and
run, the plots on screen drawn: `firstScreenMs`, set by the page); the driver's wall clock for
the latter; and the console errors and requests leaving the file (both must be none). Then the
medians, and the time to draw every plot of the page (each scrolled into view)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from chromium_cdp import Browser  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--times", type=int, default=5)
    args = parser.parse_args()
    size = args.report.stat().st_size
    print(f"{args.report}: {size / 1e6:.2f} MB ({size:,} bytes)")
    first_screen, walls, paints = [], [], []
    for i in range(args.times):          # a fresh browser each time: a cold opening, as from a file manager
        with Browser(height=900) as browser:
            wall = browser.open_page(args.report, ready="document.body.dataset.firstScreenMs")
            in_page = int(browser.evaluate("document.body.dataset.firstScreenMs")) / 1000
            paint = browser.evaluate("performance.getEntriesByName('first-contentful-paint')[0]?.startTime || 0") / 1000
            browser.pump(0.3)
            leaving = browser.observed.requests_leaving(args.report.resolve().as_uri())
            print(f"opening {i + 1}: text on screen {paint:.2f} s, plotly running and the first screen's plots "
                  f"drawn {in_page:.2f} s after navigation start (page clock; {wall:.2f} s by the driver's clock); "
                  f"console errors {len(browser.observed.console_errors)}, requests leaving the file {len(leaving)}")
            first_screen.append(in_page)
            walls.append(wall)
            paints.append(paint)
            if i == args.times - 1:
                plots = browser.evaluate("[...document.querySelectorAll('.plot')].map(p => p.id)")
                flames = browser.evaluate("document.querySelectorAll('details.flame').length")
                started = time.monotonic()
                for plot in plots:
                    browser.show(f"#{plot}")
                print(f"all {len(plots)} plots drawn by scrolling through in {time.monotonic() - started:.1f} s; "
                      f"flame graphs in the file: {flames}")
    print(f"median of {args.times}: text {statistics.median(paints):.2f} s, first screen with plots "
          f"{statistics.median(first_screen):.2f} s (page clock), {statistics.median(walls):.2f} s (driver)")


if __name__ == "__main__":
    main()
