"""Preview capture: secrets masked, bodies bounded, odd values sent as their repr."""

import json

import pytest

from treeline.preview import preview
from treeline.redact import MASK, add_known_secret, is_secret_key, redact_text


def test_secret_looking_keys_are_masked():
    body, err = preview({
        "api_key": "abc", "Authorization": "Bearer xyz", "password": "hunter2",
        "client_secret": "s", "x-api-key": "k", "accessToken": "t", "cookie": "c",
        "nested": {"token": "t", "ok": "visible"}, "author": "visible too",
        "token_count": 12, "max_tokens": 256,
    })
    assert err is None
    for key in ("api_key", "Authorization", "password", "client_secret", "x-api-key",
                "accessToken", "cookie"):
        assert body[key] == MASK, key
    assert body["nested"] == {"token": MASK, "ok": "visible"}
    assert body["author"] == "visible too"
    assert body["token_count"] == 12 and body["max_tokens"] == 256  # counts, not secrets


def test_token_like_values_are_masked_anywhere():
    samples = {
        "bearer": "Authorization: Bearer abcdef0123456789",
        "openai": "using sk-proj-abcdefghijklmnop for this",
        "treeline": "key tlk_0123456789abcdef",
        "webhook": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "github": "ghp_" + "a" * 36,
        "kv": "db password=hunter2 user=bob",
        "json": '{"api_key": "xyz-123"}',
    }
    for name, text in samples.items():
        out = redact_text(text)
        assert MASK in out, name
    assert redact_text("Authorization: Bearer abcdef0123456789") == "Authorization: Bearer " + MASK
    assert "hunter2" not in redact_text(samples["kv"]) and "user=bob" in redact_text(samples["kv"])
    assert redact_text("max_tokens=100, author=me") == "max_tokens=100, author=me"


def test_the_configured_api_key_is_masked_whatever_its_shape():
    add_known_secret("plain-looking-key-42")
    assert redact_text("key is plain-looking-key-42.") == "key is %s." % MASK


def test_secret_key_detection():
    assert is_secret_key("OPENAI_API_KEY") and is_secret_key("githubToken")
    assert not is_secret_key("tokens") and not is_secret_key("authorize_url")


def test_previews_are_bounded():
    body, _ = preview("x" * 100000, limit=1000)
    assert len(body) <= 1001
    body, _ = preview(list(range(100000)), limit=100000)
    assert len(body) == 101 and body[-1].startswith("…")  # 100 items, then a marker
    body, _ = preview({"k%d" % i: "v" * 50 for i in range(1000)}, limit=500)
    assert isinstance(body, str) and len(body) <= 501  # cut JSON becomes text
    deep = cur = {}
    for _ in range(100):
        cur["d"] = {}
        cur = cur["d"]
    body, err = preview(deep)
    assert err is None and len(json.dumps(body)) < 1000


def test_values_with_no_json_form_are_sent_as_repr():
    cases = [{(1, 2): "tuple key"}, object(), {"s": {1, 2}}, float("nan"), b"\xff\xfe"]
    loop = []
    loop.append(loop)
    cases.append(loop)
    for value in cases:
        body, err = preview(value)
        assert isinstance(body, str), value
        assert err and "JSON" in err, err


def test_repr_fallback_is_redacted_too():
    class Creds:
        def __repr__(self):
            return "Creds(api_key='sk-abcdefghijklmnop')"

    body, err = preview({"c": Creds()})
    assert "sk-abcdefghijklmnop" not in body and err


def test_text_and_bytes_pass_through():
    assert preview("hello")[0] == "hello"
    assert preview("héllo".encode())[0] == "héllo"
    assert preview({"a": (1, 2)})[0] == {"a": [1, 2]}
    assert preview({1: "int key"})[0] == {"1": "int key"}


@pytest.mark.server
def test_a_key_made_by_treeline_keys_create_is_masked(tmp_path):
    from conftest import create_key
    key = create_key(tmp_path, "write")
    assert key.startswith("tl_") and len(key) == 46, "a key as the server makes them"
    for text in (key, "export TREELINE_API_KEY=%s" % key, '{"k": "%s"}' % key,
                 "url?key=%s&x=1" % key):
        out = redact_text(text)
        assert key not in out and MASK in out, text
    # Only keys: a name that happens to start the same way is left alone.
    assert redact_text("tl_config") == "tl_config"
