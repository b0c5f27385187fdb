"""`--json`: a stored session as JSON, `render(session) -> str` (redline.output.FORMATS): every
measured run (run, calibrate), or the comparisons and every run (compare), each run the whole run
document (redline.core.run)."""

from __future__ import annotations

import json

from redline.output.verdicts import sorted_comparisons
from redline.store.session import SessionDocument


def render(session: SessionDocument) -> str:
    if session.kind == "gate" and "gate" in session.documents:
        document = session.documents["gate"]          # every test's verdict and evidence, its runs by uid
    elif session.comparisons or session.kind == "compare":
        document = {"comparisons": [c.as_json() for c in sorted_comparisons(session.comparisons)],
                    "runs": [r.to_json() for r in session.runs]}
    else:
        document = [r.to_json() for r in session.measured]
    return json.dumps(document, indent=2) + "\n"
