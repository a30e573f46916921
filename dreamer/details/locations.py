"""Locations in a text: URLs and e-mail addresses, paths and file names, hosts and addresses.

Read first, before versions, dates and numbers: an address holds digits and dots that would
otherwise be read as a version or a number.
"""

from __future__ import annotations

from dreamer.details.kinds import Detail
from dreamer.details.matches import collect, cut, digit_pattern, find, needing

__all__ = ["extract_locations"]

# Each with what every match of it holds (`needing`): most texts hold none of these marks.
_URL = needing(r"(?i)\b(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s<>\"'()\[\]{}]+", r"(?i)://|www\.")
_EMAIL = needing(r"(?i)\b[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+", "@")
_ABSOLUTE_PATH = needing(r"(?<![\w.:/])(?:~|\.{1,2})?/[\w.@%+~\-]+(?:/[\w.@%+~\-]+)*/?", "/")
_WINDOWS_PATH = needing(r"\b[A-Za-z]:\\[^\s]+", r":\\")
_RELATIVE_PATH = needing(r"(?<![\w/])[A-Za-z_][\w.\-]*(?:/[\w.@%+~\-]+)+/?", "/")
_FILE_EXTENSIONS = (
    "py|toml|json|ya?ml|md|txt|cfg|conf|ini|log|sh|service|timer|socket|db|sqlite3?|env|lock|csv|html?"
    "|js|ts|rs|go|c|h|cpp|java|rb|sql|xml|pdf|png|jpe?g|gz|tgz|zip|tar"
)
_FILE_NAME = needing(rf"(?i)\b[\w\-]+(?:\.[\w\-]+)*\.(?:{_FILE_EXTENSIONS})\b", r"\.\w")
_IPV4 = digit_pattern(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_TLDS = (
    "com|org|net|io|dev|ai|app|co|uk|de|fr|nl|eu|us|ca|au|jp|info|biz|edu|gov|me|sh|tech|cloud"
    "|local|lan|internal|home|arpa|localdomain|test|example|invalid"
)
_HOST_NAME = needing(
    rf"(?i)\b(?:localhost|(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+(?:{_TLDS}))(?::\d+)?\b",
    r"(?i)localhost|\.\w",
)


def _trim_url(url: str) -> str:
    return url.rstrip(".,;:!?").rstrip("/")


def extract_locations(text: str, found: dict[Detail, list[str]]) -> str:
    matches, text = collect(_URL, text)
    found[Detail.URL] += [_trim_url(m.group(0)) for m in matches]
    matches, text = collect(_EMAIL, text)
    found[Detail.URL] += [m.group(0).casefold() for m in matches]
    for pattern in (_WINDOWS_PATH, _ABSOLUTE_PATH):
        matches, text = collect(pattern, text)
        found[Detail.PATH] += [m.group(0).rstrip(".,;:!?") for m in matches]
    for match in find(_RELATIVE_PATH, text):
        path = match.group(0).rstrip(".,;:!?")
        segments = path.rstrip("/").split("/")
        # "and/or", "TCP/IP" are words; "src/cli.py" and "a/b/c" are paths.
        if len(segments) >= 3 or _FILE_NAME.fullmatch(segments[-1]):
            found[Detail.PATH].append(path)
            text = cut(text, match.span())
    matches, text = collect(_FILE_NAME, text)
    found[Detail.PATH] += [m.group(0) for m in matches]
    matches, text = collect(_IPV4, text)
    found[Detail.HOST] += [m.group(0) for m in matches]
    matches, text = collect(_HOST_NAME, text)
    found[Detail.HOST] += [m.group(0).casefold() for m in matches]
    return text
