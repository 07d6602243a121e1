"""The server URL and API key a run or a client is given, checked where they are given.

A URL or key the SDK cannot use is the one mistake it raises for: found at init,
before any training step, with what to write instead, rather than as data lost later
on the background thread."""

import os
import urllib.parse

from .errors import InvalidValue

DEFAULT_URL = "http://127.0.0.1:3000"  # what `treeline serve` listens on by default


def resolve(url=None, api_key=None, *, url_name="url", key_name="api_key"):
    """(url, api_key): the ones given, else TREELINE_URL and TREELINE_API_KEY, else the
    default URL and no key. Raises ValueError for a URL or key that cannot work; the
    message names where it came from (`url_name`, `key_name` or the variable)."""
    if url:
        url = check_url(url, url_name)
    elif os.environ.get("TREELINE_URL"):
        url = check_url(os.environ["TREELINE_URL"], "TREELINE_URL")
    else:
        url = DEFAULT_URL
    if api_key:
        api_key = check_key(api_key, key_name)
    else:
        api_key = check_key(os.environ.get("TREELINE_API_KEY") or None, "TREELINE_API_KEY")
    return url, api_key


def check_url(url, name="url"):
    """The URL as the SDK uses it (no trailing slash, scheme in lower case), or
    ValueError saying what to write instead."""
    if type(url) is not str:
        raise InvalidValue("%s must be a string such as %r, got %s"
                           % (name, DEFAULT_URL, type(url).__name__))
    if url != url.strip():
        raise InvalidValue("%s %r has spaces or a line break around it: write %r"
                           % (name, url, url.strip()))
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise InvalidValue("%s %r holds a space or a control character; write the server's "
                           "address only, such as %r" % (name, url, DEFAULT_URL))
    scheme, sep, rest = url.partition("://")
    if not sep:
        # "127.0.0.1:3000" or "localhost:3000": urllib would take the host for a scheme.
        raise InvalidValue("%s %r has no scheme: write %r" % (name, url, "http://" + _address(url)))
    if scheme.lower() not in ("http", "https"):
        raise InvalidValue("%s %r: the scheme must be http:// or https://, not %s://; write %r"
                           % (name, url, scheme, "http://" + _address(rest)))
    parts = urllib.parse.urlsplit(url)
    scheme = scheme.lower()
    address = _address(rest).rpartition("@")[2]
    if not parts.hostname:
        raise InvalidValue("%s %r has no host: write %s://HOST:PORT, such as %r"
                           % (name, url, scheme, DEFAULT_URL))
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise InvalidValue("%s %r: the port must be a number from 1 to 65535, such as %r"
                           % (name, url, DEFAULT_URL))
    if parts.username is not None or parts.password is not None:
        raise InvalidValue("%s %r holds a user name or password: write %r, and give the key as "
                           "TREELINE_API_KEY (or api_key=)" % (name, url, scheme + "://" + address))
    if parts.path not in ("", "/"):
        raise InvalidValue("%s %r has a path %r: give the server's address only, %r"
                           % (name, url, parts.path, scheme + "://" + address))
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise InvalidValue("%s %r has more than an address (%r): give the server's address "
                           "only, %r" % (name, url, url[len(scheme + "://" + address):].lstrip("/"),
                                       scheme + "://" + address))
    return scheme + "://" + address


def _address(text):
    """The host and port at the start of a URL's remainder: up to the first / ? or #."""
    for stop in "/?#":
        text = text.partition(stop)[0]
    return text


def check_key(key, name="api_key"):
    """The key, or None for no key; ValueError for one no server could accept. The
    message never shows the key."""
    if key is None or key == "":
        return None
    if type(key) is not str:
        raise InvalidValue("%s must be a string (the key `treeline keys create` printed), got %s"
                           % (name, type(key).__name__))
    if key.lower().startswith("bearer "):
        raise InvalidValue("%s starts with 'Bearer ': give the key alone; the SDK sends the "
                           "'Bearer ' itself" % name)
    stripped = key.strip()
    if stripped != key and stripped and _visible(stripped) is None:
        raise InvalidValue("%s has spaces or a line break around the key: remove them (the key "
                           "itself is the %d characters between)" % (name, len(stripped)))
    bad = _visible(key)
    if bad is not None:
        c = key[bad]
        what = ("a space" if c == " " else "a control character" if ord(c) < 32 or ord(c) == 127
                else "the character U+%04X" % ord(c))
        raise InvalidValue("%s holds %s at position %d; an API key is visible ASCII characters "
                           "without spaces, as `treeline keys create` prints it: copy it again"
                           % (name, what, bad + 1))
    return key


def _visible(text):
    """The index of the first character that is not visible ASCII, or None."""
    for i, c in enumerate(text):
        if not "!" <= c <= "~":
            return i
    return None
