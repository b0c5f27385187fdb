"""Posting a work item's comment to its pull request (optional: `collector --github-token-file`).

The token goes to the API's own host only. Redirects are not followed by urllib (it would send
the Authorization header to wherever GitHub, or anything in between, points): a redirect to the
same scheme, host and port (a renamed repository) is followed by hand, with the same method and
body, at most MAX_REDIRECTS times; one to another host is a failed post with the reason. Every
answer is checked before it is used.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from redline.core.errors import UsageError

TARGET = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#(?P<number>\d+)$")
TIMEOUT_S = 30
MAX_REDIRECTS = 3
PAGES_SEARCHED = 10          # × 100 comments, when looking for a comment posted before
REDIRECTS = (301, 302, 303, 307, 308)


class PostFailed(Exception):
    pass


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None                      # the 3xx comes back as an HTTPError, handled below


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


class Poster:
    def __init__(self, token_file: Path, api: str = "https://api.github.com"):
        try:
            self.token = token_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--github-token-file {token_file}: {getattr(exc, 'strerror', None) or exc}") from exc
        if not self.token:
            raise UsageError(f"--github-token-file {token_file} is empty")
        self.api = api.rstrip("/")
        self.opener = urllib.request.build_opener(_NoRedirects())

    def post(self, target: str, body: str) -> str:
        """`owner/repo#number` → the comment's URL."""
        answer = self._request("POST", f"{self._comments(target)}", json.dumps({"body": body}).encode())
        if not isinstance(answer, dict) or not isinstance(answer.get("html_url", ""), str):
            raise PostFailed("GitHub's answer is not a comment")
        return answer.get("html_url", "")

    def find(self, target: str, marker: str) -> str | None:
        """The URL of the pull request's comment holding `marker`, if one was posted."""
        for page in range(1, PAGES_SEARCHED + 1):
            answer = self._request("GET", f"{self._comments(target)}?per_page=100&page={page}", None)
            if not isinstance(answer, list):
                raise PostFailed("GitHub's answer is not a list of comments")
            for comment in answer:
                if isinstance(comment, dict) and marker in str(comment.get("body", "")):
                    return str(comment.get("html_url", ""))
            if len(answer) < 100:
                return None
        return None

    def _comments(self, target: str) -> str:
        match = TARGET.match(target)
        if not match:
            raise PostFailed(f"not a pull request reference: {target!r}")
        return f"{self.api}/repos/{match['repo']}/issues/{match['number']}/comments"

    def _request(self, method: str, url: str, data: bytes | None):
        home = _origin(self.api)
        for _ in range(MAX_REDIRECTS + 1):
            if _origin(url) != home:
                raise PostFailed(f"GitHub redirected to another host ({urllib.parse.urlsplit(url).netloc}): not "
                                 f"followed, the token is sent to {urllib.parse.urlsplit(self.api).netloc} only")
            request = urllib.request.Request(url, data=data, method=method, headers={
                "Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
                "Content-Type": "application/json", "User-Agent": "redline-collector"})
            try:
                with self.opener.open(request, timeout=TIMEOUT_S) as response:
                    return json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as exc:
                location = exc.headers.get("Location") if exc.code in REDIRECTS else None
                if not location:
                    raise PostFailed(f"HTTP {exc.code} {exc.reason}") from None
                url = urllib.parse.urljoin(url, location)
            except (urllib.error.URLError, OSError, ValueError, RecursionError) as exc:
                raise PostFailed(str(exc)) from None
        raise PostFailed(f"more than {MAX_REDIRECTS} redirects")
