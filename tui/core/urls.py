"""Is a server URL one a connection can use? One line that says what is wrong with it, never repeating its
credentials (it is checked before they are registered for redaction)."""

from __future__ import annotations

from urllib.parse import urlsplit

_GIVE_URL = "give http://HOST:PORT or https://HOST:PORT"


def url_problem(url: str) -> str | None:
    """Why `url` is not http(s)://HOST[:PORT] with a port in 1–65535, or None when it is (never repeating it)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:  # an out-of-range or non-numeric port, a broken IPv6 literal
        reason = str(error).rstrip(".").replace("0-65535", "1–65535")
        return f"{reason[:1].lower()}{reason[1:]}; {_GIVE_URL}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return _GIVE_URL
    if port == 0:
        return f"port 0 is out of range 1–65535; {_GIVE_URL}"
    return None


def bad_url(url: str) -> str | None:
    """The one line that says what is wrong with `url` (None when nothing is): it repeats the URL as typed, but
    for a `user:password@` in it (it is checked before its credentials are registered for redaction), and
    suggests http:// where the scheme is missing: "bad URL 'localhost:8000': no scheme; did you mean
    http://localhost:8000?"."""
    problem = url_problem(url)
    return f"bad URL {_shown_url(url)!r}: {_url_reason(url, problem)}" if problem else None


def usable_url(url: str) -> str:
    """`url` as it is, or ValueError: a URL no connection can use is a usage error at load, never an error deep
    in a client."""
    problem = bad_url(url)
    if problem:
        raise ValueError(problem)
    return url


def _url_reason(url: str, problem: str) -> str:
    """What is wrong with `url`, a step further than `url_problem` where the scheme or the host is the trouble."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        scheme, rest = "", url.strip().lstrip("/")
    if scheme.lower() not in ("http", "https"):
        what = f"the scheme {scheme!r} is not http or https" if scheme else "no scheme"
        guess = f"http://{rest}"
        still = url_problem(guess) if rest else _GIVE_URL
        if still is None:
            return f"{what}; did you mean {_shown_url(guess)}?"
        return f"{what}; {still}" if still == _GIVE_URL else f"{what}, and {still}"
    try:
        host = urlsplit(url).hostname
    except ValueError:  # a broken IPv6 literal: url_problem says so
        return problem
    return problem if host else f"no host; {_GIVE_URL}"


def _authority(rest: str) -> tuple[str, str]:
    """`rest` (a URL after its `scheme://`) as its authority (`user:password@host:port`) and what follows."""
    for index, char in enumerate(rest):
        if char in "/?#":
            return rest[:index], rest[index:]
    return rest, ""


def _shown_url(url: str) -> str:
    """`url` as typed without its `user:password@`, for a message: it is checked before its credentials are
    registered for redaction (nor can `without_credentials` parse a URL this broken)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, tail = _authority(rest)
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{tail}"
