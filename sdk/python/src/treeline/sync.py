"""`treeline-sync DIR`: replays spooled requests to the server, oldest first.

DIR may be one run's spool directory or the spool root holding several. Each request
is sent with the Idempotency-Key it was first given, so replaying twice (or replaying
what the training process already replayed) stores nothing twice."""

import argparse
import logging
import os
import sys

from .run import DEFAULT_URL, default_spool_dir
from .spool import SUFFIX, Spool, read_file
from .transport import Transport


def _run_dirs(root):
    found = []
    for here, _, files in os.walk(root):
        if any(f.endswith(SUFFIX) for f in files):
            found.append(here)
    return sorted(found)


def _url_for(directory, explicit):
    if explicit:
        return explicit
    if os.environ.get("TREELINE_URL"):
        return os.environ["TREELINE_URL"]
    for path in Spool(directory).pending()[:1]:
        try:
            header, _ = read_file(path)
            if header.get("url"):
                return header["url"]
        except (OSError, ValueError, KeyError):
            pass
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
    parser.add_argument("--api-key", default=os.environ.get("TREELINE_API_KEY"),
                        help="API key (default: $TREELINE_API_KEY)")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    dirs = _run_dirs(args.dir)
    if not dirs:
        print("treeline-sync: nothing to send in %s" % args.dir)
        return 0
    total_sent = total_left = total_aside = 0
    for directory in dirs:
        url = _url_for(directory, args.url)
        spool = Spool(directory, url=url)
        sent, left = spool.replay(Transport(url, args.api_key, args.timeout), _report)
        total_sent += sent
        total_left += left
        total_aside += spool.set_aside
        state = "done" if not left else "%d left (the server cannot take them yet)" % left
        aside = (", %d set aside as .rejected after the server kept failing them"
                 % spool.set_aside) if spool.set_aside else ""
        print("treeline-sync: %s -> %s: sent %d%s, %s" % (directory, url, sent, aside, state))
    print("treeline-sync: sent %d request(s), %d set aside, %d left"
          % (total_sent, total_aside, total_left))
    return 0 if total_left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
