"""What people and machines read. A finished session is rendered from its stored document
(redline.store.session.SessionDocument) by one function per format, all of one signature,
`render(session) -> str`: `FORMATS` below. Besides: live progress while a session runs
(`progress`), the tables and verdict words the renderers share (`tables`, `verdicts`,
`bisect_report`), and `files` (output files checked before anything starts, written atomically)."""

from __future__ import annotations

import importlib
from typing import Callable

# format → the module whose render(session) -> str writes it (imported when used)
FORMATS = {"terminal": "redline.output.terminal_report", "json": "redline.output.json_file",
           "markdown": "redline.output.markdown", "html": "redline.output.html"}


def renderer(name: str) -> Callable:
    return importlib.import_module(FORMATS[name]).render
