"""Posting a work item's comment to its pull request (optional: `collector --github-token-file`)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

from redline.core.errors import UsageError

TARGET = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#(?P<number>\d+)$")
TIMEOUT_S = 30


class PostFailed(Exception):
    pass


class Poster:
    def __init__(self, token_file: Path, api: str = "https://api.github.com"):
        try:
            self.token = token_file.read_text().strip()
        except OSError as exc:
            raise UsageError(f"--github-token-file {token_file}: {exc.strerror}") from exc
        if not self.token:
            raise UsageError(f"--github-token-file {token_file} is empty")
        self.api = api.rstrip("/")

    def post(self, target: str, body: str) -> str:
        """`owner/repo#number` → the comment's URL."""
        match = TARGET.match(target)
        if not match:
            raise PostFailed(f"not a pull request reference: {target!r}")
        request = urllib.request.Request(
            f"{self.api}/repos/{match['repo']}/issues/{match['number']}/comments",
            data=json.dumps({"body": body}).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
                     "Content-Type": "application/json", "User-Agent": "redline-collector"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read() or b"{}").get("html_url", "")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PostFailed(str(exc)) from exc
