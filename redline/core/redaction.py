"""The one redaction of secrets in text redline prints, stores or passes on: a password in a URL
(`redis://:PW@host`, `redis://user:PW@host`, `https://user:TOKEN@host`), a secret given as a URL
parameter (`?password=PW`, `&token=…`), and in an argument list the value after a flag that takes
a secret (`--requirepass PW`, `-a PW`).

Used wherever a URL or an argument list leaves redline's hands: log lines and error lines, the
argv a store session keeps (and so the HTML report that shows it), the `later=` hints naming a
command to run. Secrets themselves travel in files and the environment, never in a child's argv.
"""

from __future__ import annotations

import re

HIDDEN = "***"
# scheme://user:password@ — the password is what lies between the first ':' of the userinfo and '@'
# (up to the last '@' of the word: a password may hold a raw '@'; hiding too much is the safe side)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)(?P<secret>\S*)@")
# a secret as a URL parameter (redis-py reads ?password=; tokens travel the same way)
SECRET_PARAMETERS = ("password", "pass", "passwd", "pwd", "requirepass", "token", "access_token", "secret",
                     "auth", "key")
_PARAMETER = re.compile(r"(?P<head>[?&;](?:" + "|".join(SECRET_PARAMETERS) + r")=)(?P<secret>[^&;#\s]*)",
                        re.IGNORECASE)
# flags whose next argument (or =value) is a secret
SECRET_FLAGS = ("--requirepass", "--masterauth", "--password", "--pass", "--token", "-a", "--authenticate",
                "--user-password")


def redact(text: str) -> str:
    """`text` with every password or token it holds in a URL replaced by ***."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: m["head"] + (HIDDEN if m["secret"] else "") + "@", text)
    return _PARAMETER.sub(lambda m: m["head"] + HIDDEN, text)


def redact_argv(argv: list[str]) -> list[str]:
    """An argument list with every secret hidden: in URLs, and the values of SECRET_FLAGS."""
    out: list[str] = []
    hide_next = False
    for argument in map(str, argv):
        if hide_next:
            out.append(HIDDEN)
            hide_next = False
            continue
        flag, equals, _ = argument.partition("=")
        if argument in SECRET_FLAGS:
            hide_next = True
            out.append(argument)
        elif equals and flag in SECRET_FLAGS:
            out.append(f"{flag}={HIDDEN}")
        else:
            out.append(redact(argument))
    return out
