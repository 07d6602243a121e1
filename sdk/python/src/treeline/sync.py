"""`treeline-sync DIR`: replays spooled requests to the server, oldest first.

DIR may be one run's spool directory or the spool root holding several. Each request
is sent with the Idempotency-Key it was first given, so replaying twice (or replaying
what the training process already replayed) stores nothing twice.

When the server refuses the key (401, 403), the files stay where they are, and the
command says that a new key is needed: a write key, given as --api-key or
TREELINE_API_KEY."""

import argparse
import logging
import os
import sys

from .config import DEFAULT_URL, check_key, check_url
from .delivery import key_advice
from .run import default_spool_dir
from .spool import SUFFIX, Spool, read_file
from .transport import Transport, refusal


def _run_dirs(root):
    found = []
    for here, _, files in os.walk(root):
        if any(f.endswith(SUFFIX) for f in files):
            found.append(here)
    return sorted(found)


def _url_for(directory, explicit):
    """The URL to send a directory's files to; ValueError for one that cannot work."""
    if explicit:
        return check_url(explicit, "--url")
    if os.environ.get("TREELINE_URL"):
        return check_url(os.environ["TREELINE_URL"], "TREELINE_URL")
    for path in Spool(directory).pending()[:1]:
        try:
            header, _ = read_file(path)
        except (OSError, ValueError, KeyError):
            continue
        if header.get("url"):  # written by an older SDK, it may not pass: then say so
            return check_url(header["url"], "the URL in %s (give --url instead)" % path)
    return DEFAULT_URL


def _report(req, status, payload):
    if status >= 400:
        err = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
        print("treeline-sync: server refused a %s request: HTTP %d %s %s (set aside as "
              ".rejected)" % (req.what, status, err.get("code", ""), err.get("message", "")))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="treeline-sync", description="Send spooled Treeline data to the server.")
    parser.add_argument("dir", nargs="?", default=default_spool_dir(),
                        help="a spool directory (default: %(default)s)")
    parser.add_argument("--url", help="server URL (default: $TREELINE_URL, else the URL "
                        "the data was meant for)")
    parser.add_argument("--api-key", help="API key (default: $TREELINE_API_KEY)")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        if args.url:
            check_url(args.url, "--url")
        if args.api_key is not None:
            api_key = check_key(args.api_key, "--api-key")
        else:
            api_key = check_key(os.environ.get("TREELINE_API_KEY"), "TREELINE_API_KEY")
    except ValueError as err:
        print("treeline-sync: %s" % err)
        return 2

    dirs = _run_dirs(args.dir)
    if not dirs:
        print("treeline-sync: nothing to send in %s" % args.dir)
        return 0
    total_sent = total_left = total_aside = 0
    refused_by = {}  # url -> the refusal: the other directories for it are not tried
    for directory in dirs:
        try:
            url = _url_for(directory, args.url)
        except ValueError as err:
            print("treeline-sync: %s" % err)
            return 2
        spool = Spool(directory, url=url)
        if url in refused_by:
            left = len(spool.pending())
            total_left += left
            print("treeline-sync: %s -> %s: %d left (the key was refused)" % (directory, url, left))
            continue
        sent, left = spool.replay(Transport(url, api_key, args.timeout), _report)
        total_sent += sent
        total_left += left
        total_aside += spool.set_aside
        if spool.refused:
            refused_by[url] = spool.refused
            _say_refused(url, directory, spool.refused, api_key)
            state = "%d left (the key was refused)" % left
        elif spool.error is not None:
            state = "%d left (sending failed: %s: %s)" % (left, type(spool.error).__name__,
                                                        spool.error)
        else:
            state = "done" if not left else "%d left (the server cannot take them yet)" % left
        aside = (", %d set aside as .rejected after the server kept failing them"
                 % spool.set_aside) if spool.set_aside else ""
        print("treeline-sync: %s -> %s: sent %d%s, %s" % (directory, url, sent, aside, state))
    print("treeline-sync: sent %d request(s), %d set aside, %d left"
          % (total_sent, total_aside, total_left))
    return 0 if total_left == 0 else 1


def _say_refused(url, directory, answer, api_key):
    status, payload = answer
    code, message = refusal(payload)
    print("treeline-sync: %s refused the key: HTTP %d %s: %s. A new key is needed: give a "
          "write key with --api-key KEY or TREELINE_API_KEY=KEY. The files stay in %s."
          % (url, status, code, message or "(no message)", directory))
    print("treeline-sync: " + key_advice(status, api_key, "--api-key or TREELINE_API_KEY"))


if __name__ == "__main__":
    sys.exit(main())
