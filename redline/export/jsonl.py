"""`--jsonl FILE`: every run document as one line of JSON, appended and flushed as soon as the run
is stored, so that a long session (a catalogue, a bisection) can be followed, tailed or shipped
while it runs; the session's opening and closing lines frame them. `--json` writes the same
documents once, when the session ends."""

from __future__ import annotations

import json
from pathlib import Path

from redline.core.run import Run


class JsonLinesSink:
    """redline.engine.sinks.ResultSink appending {"event": …} lines to a file."""

    def __init__(self, path: Path):
        self.path = path
        self.file = None

    def _write(self, event: str, document: dict) -> None:
        if self.file is None:
            self.file = self.path.open("a", encoding="utf-8")
        self.file.write(json.dumps({"event": event, **document}, default=str) + "\n")
        self.file.flush()

    def session_started(self, session) -> None:
        self._write("session_started", {"session": session.session_id, "kind": session.kind,
                                        "started_at": session.started_at})

    def run_started(self, run: Run) -> None:
        """Only finished runs are written: a line is a whole document."""

    def run_finished(self, run: Run) -> None:
        self._write("run", {"run": run.to_json()})

    def run_interrupted(self, run: Run, reason: str) -> None:
        self._write("run_interrupted", {"uid": run.uid, "test": run.test, "reason": reason})

    def session_finished(self, session) -> str | None:
        self._write("session_finished", {"session": session.session_id, "status": session.status,
                                         "runs": len(session.runs),
                                         "comparisons": [c.as_json() for c in session.comparisons]})
        self.file.close()
        return None
