"""The server URL and API key are checked where they are given (init, Client,
import_spans, treeline-sync, TREELINE_URL and TREELINE_API_KEY): one that cannot work
raises ValueError at setup, saying what to write instead, and never shows the key."""

import pytest

import treeline as tl
from treeline.sync import main as sync_main

BAD_URLS = [
    ("127.0.0.1:3000", "has no scheme: write 'http://127.0.0.1:3000'"),
    ("localhost:3000/traces", "has no scheme: write 'http://localhost:3000'"),
    ("http://host:3000/traces", "has a path '/traces': give the server's address only, "
                                "'http://host:3000'"),
    ("ftp://host:3000", "the scheme must be http:// or https://, not ftp://; write "
                        "'http://host:3000'"),
    ("http://host:3000?run=1", "give the server's address only, 'http://host:3000'"),
    ("http://:3000", "has no host"),
    ("http://host:99999", "the port must be a number from 1 to 65535"),
    ("http://user:pw@host:3000", "holds a user name or password: write 'http://host:3000'"),
    ("http://host:3000\n", "has spaces or a line break around it: write 'http://host:3000'"),
]


@pytest.mark.parametrize("url, says", BAD_URLS)
def test_a_url_that_cannot_work_raises_at_init_saying_what_to_write(url, says, tmp_path,
                                                                    monkeypatch):
    spool = str(tmp_path / "spool")
    with pytest.raises(ValueError) as err:
        tl.init("p", url=url, spool_dir=spool, finish_on_exit=False)
    assert str(err.value).startswith("url %r" % url) and says in str(err.value)
    monkeypatch.setenv("TREELINE_URL", url)
    with pytest.raises(ValueError) as err:
        tl.init("p", spool_dir=spool, finish_on_exit=False)
    assert str(err.value).startswith("TREELINE_URL %r" % url) and says in str(err.value)
    with pytest.raises(ValueError, match="TREELINE_URL"):
        tl.Client()
    with pytest.raises(ValueError, match="TREELINE_URL"):
        tl.import_spans([])


def test_good_urls_pass_and_lose_their_trailing_slash(make_run, monkeypatch):
    assert make_run(url="http://host:3000/").url == "http://host:3000"
    assert make_run(url="HTTPS://host").url == "https://host"
    assert tl.Client("http://[::1]:3000/").url == "http://[::1]:3000"
    monkeypatch.setenv("TREELINE_URL", "http://127.0.0.1:9")
    assert make_run().url == "http://127.0.0.1:9"
    # A run switched off sends nothing: its URL is not used, so not checked either.
    assert tl.init("p", url="127.0.0.1:3000", disabled=True).counters()["dropped_spans"] == 0


@pytest.mark.parametrize("key, says", [
    ("Bearer tl_abcdefgh", "starts with 'Bearer ': give the key alone"),
    ("tl_abcdefgh\n", "spaces or a line break around the key: remove them"),
    ("tl_abc defgh", "holds a space at position 7"),
    ("tl_abc\u2019defgh", "holds the character U+2019 at position 7"),
])
def test_a_key_that_cannot_work_raises_without_showing_it(key, says, tmp_path, monkeypatch):
    with pytest.raises(ValueError) as err:
        tl.init("p", api_key=key, spool_dir=str(tmp_path), finish_on_exit=False)
    assert str(err.value).startswith("api_key ") and says in str(err.value)
    assert "abcdefgh" not in str(err.value) and "defgh" not in str(err.value)
    monkeypatch.setenv("TREELINE_API_KEY", key)
    with pytest.raises(ValueError, match="^TREELINE_API_KEY "):
        tl.init("p", spool_dir=str(tmp_path), finish_on_exit=False)
    with pytest.raises(ValueError, match="^TREELINE_API_KEY "):
        tl.Client()


def test_sync_checks_its_url_and_key_too(tmp_path, capsys):
    assert sync_main([str(tmp_path), "--url", "127.0.0.1:3000"]) == 2
    assert "--url '127.0.0.1:3000' has no scheme: write 'http://127.0.0.1:3000'" \
        in capsys.readouterr().out
    assert sync_main([str(tmp_path), "--api-key", "Bearer tl_abcdefgh"]) == 2
    out = capsys.readouterr().out
    assert "--api-key starts with 'Bearer '" in out and "abcdefgh" not in out
