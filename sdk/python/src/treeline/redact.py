"""Redaction for preview capture: secret-looking keys and token-like values."""

import functools
import re

MASK = "[REDACTED]"

# Whole words of a key that mark it secret ("auth" but not "author").
_SECRET_WORDS = frozenset((
    "password", "passwd", "passphrase", "secret", "secrets", "token", "authorization",
    "auth", "cookie", "credential", "credentials", "apikey", "signature",
))
# Runs of letters inside a key ("x-api-key", "clientSecret", "githubtoken").
_SECRET_PARTS = ("apikey", "accesskey", "secretkey", "privatekey", "password",
                 "authorization", "credential", "clientsecret")

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")


@functools.lru_cache(maxsize=4096)
def is_secret_key(key):
    words = [w for w in _SPLIT.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    joined = "".join(words)
    return joined.endswith("token") or any(p in joined for p in _SECRET_PARTS)


# Values that look like credentials wherever they appear in text.
_SECRET_NAMES = (
    r"(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|client[_-]?secret|password|passwd"
    r"|authorization|(?:access|refresh|id|auth|api|bearer|session)?[_-]?token)"
)
_TEXT_RULES = [
    # "Authorization: Bearer abc…", "token xyz…": keep the scheme word, hide the credential.
    (re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{6,}"), r"\1\2" + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), MASK),                       # model-provider keys
    # Treeline API keys: `tl_` and 43 base64url characters, as `treeline keys create`
    # makes them (and the older `tlk_`/`treeline_` shapes).
    (re.compile(r"\btl_[A-Za-z0-9_-]{40,}"), MASK),
    (re.compile(r"\b(?:tlk|treeline)_[A-Za-z0-9_-]{8,}"), MASK),
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=_-]{8,}"), MASK),                  # webhook secrets
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), MASK),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}"), MASK),  # JWT
    # key=value and "key": "value" in free text.
    (re.compile(
        r"(?i)((?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_-])*" + _SECRET_NAMES + r"(?![A-Za-z0-9_])"
        r"[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\]|(?:bearer|basic|token)\s+\[REDACTED\])"
        r"[^\s\"'&,;}]+"
    ), r"\1" + MASK),
]

_known = []  # exact secrets this process was given (the API key), whatever their shape


def add_known_secret(value):
    if value and len(value) >= 6 and value not in _known:
        _known.append(value)


def redact_text(text):
    for secret in _known:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, repl in _TEXT_RULES:
        text = pattern.sub(repl, text)
    return text


def redact_config(value, depth=0):
    """Masks secret keys in a run config (sent with every run, whatever the capture)."""
    if depth > 20:
        return value
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and is_secret_key(k) and _is_body(v)
                else redact_config(v, depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_config(v, depth + 1) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _is_body(value):
    # Numbers under a secret-looking key ("token_count": 12) are not secrets.
    return not (value is None or isinstance(value, (bool, int, float)))
