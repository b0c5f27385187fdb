"""One self-contained HTML page: sections of escaped text and tables, Plotly figures, embedded
flame graphs. Nothing is fetched when the file is opened: the style, the page's script and
plotly.min.js (from the `plotly` package, gzip + base64, once per file) are inside it; each
flame-graph SVG is inside it too (gzip + base64), unpacked into its own frame where inferno's
search and zoom keep working."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

ASSETS = resources.files("redline.output.html")
_SVG_HEIGHT = re.compile(rb'<svg[^>]*?\sheight="(\d+)"')
# inferno remembers zoom and search in the page's address (history.replaceState); inside a frame
# whose address is a blob: that is refused, so the frame keeps them to itself
_KEEP_STATE_IN_FRAME = (b'<script type="text/ecmascript"><![CDATA[(function () { var replace = '
                        b'history.replaceState.bind(history); history.replaceState = function (s, t, u) { '
                        b'try { replace(s, t, u); } catch (e) { /* a blob: frame keeps its address */ } }; })();'
                        b']]></script>')


def text(value) -> str:
    """Any text from a suite, a server, a file or the command line, safe in HTML."""
    return html.escape("" if value is None else str(value))


def _packed(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")


@lru_cache(maxsize=1)
def plotly_packed() -> str:
    """plotly.min.js as shipped in the `plotly` package, packed."""
    from plotly.offline import get_plotlyjs
    return _packed(get_plotlyjs().encode())


def _script_json(document) -> str:
    """JSON inside <script>: '</' can never close the element."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False).replace("</", "<\\/").replace("<!--", "<\\!--")


@dataclass
class Page:
    title: str
    subtitle: list[str] = field(default_factory=list)
    sections: list[tuple[str, str, str]] = field(default_factory=list)      # (anchor, heading, html)
    figures: dict[str, dict] = field(default_factory=dict)
    payloads: dict[str, str] = field(default_factory=dict)

    def figure(self, spec: dict, *, height: int) -> str:
        """A placeholder for a Plotly figure ({data, layout}); drawn by the page's script."""
        anchor = f"fig-{len(self.figures) + 1}"
        spec["layout"].setdefault("height", height)
        self.figures[anchor] = spec
        return f'<div class="plot" id="{anchor}" style="height:{height}px"></div>'

    def flame_graph(self, svg_path: str | Path | None, caption: str, *, open_: bool = False) -> str:
        """An inferno SVG inside the page, opened into a frame on demand; a note if it is gone."""
        if not svg_path:
            return ""
        try:
            svg = Path(svg_path).read_bytes()
        except OSError as exc:
            return f'<p class="note">{text(caption)}: {text(svg_path)} cannot be read ({text(exc.strerror)})</p>'
        opening = re.search(rb"<svg[^>]*>", svg)
        if opening:
            svg = svg[:opening.end()] + _KEEP_STATE_IN_FRAME + svg[opening.end():]
        height = _SVG_HEIGHT.search(svg)
        anchor = f"svg-{len(self.payloads) + 1}"
        self.payloads[anchor] = _packed(svg)
        return (f'<details class="flame" data-payload="{anchor}" data-height="{int(height.group(1)) if height else 800}"'
                f'{" open" if open_ else ""}><summary>{text(caption)}</summary><div class="flame-frame"></div></details>')

    def section(self, anchor: str, heading: str, body: str) -> None:
        self.sections.append((anchor, heading, body))

    def render(self) -> str:
        nav = "".join(f'<a href="#{a}">{text(h)}</a>' for a, h, _ in self.sections)
        body = "".join(f'<section id="{a}"><h2>{text(h)}</h2>{b}</section>' for a, h, b in self.sections)
        payloads = "".join(f'<script type="application/octet-stream" id="{a}">{p}</script>'
                           for a, p in self.payloads.items())
        subtitle = "".join(f"<p>{line}</p>" for line in self.subtitle)
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{text(self.title)}</title><style>{(ASSETS / 'page.css').read_text()}</style></head>"
                f"<body><header><h1>{text(self.title)}</h1>{subtitle}</header><nav>{nav}</nav><main>{body}</main>"
                f'<script type="application/json" id="redline-figures">{_script_json(self.figures)}</script>'
                f'<script type="application/octet-stream" id="redline-plotly">{plotly_packed()}</script>'
                f"{payloads}<script>{(ASSETS / 'page.js').read_text()}</script></body></html>\n")


def table(headers: list[str], rows: list[list[str]], *, numeric: set[int] = frozenset(), css: str = "") -> str:
    """An HTML table; cells are HTML already (escape text with `text`)."""
    def cell(tag: str, i: int, value: str) -> str:
        css_class = ' class="num"' if i in numeric else ""
        return f"<{tag}{css_class}>{value}</{tag}>"
    head = "".join(cell("th", i, text(h)) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f'<table{f" class={css!r}" if css else ""}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def facts_table(pairs: list[tuple[str, object]]) -> str:
    """Label → value rows (values are text, escaped here); empty values are left out."""
    rows = "".join(f"<tr><th>{text(k)}</th><td>{text(v)}</td></tr>" for k, v in pairs if v not in (None, "", [], {}))
    return f'<table class="facts"><tbody>{rows}</tbody></table>'
