"""The run's page on the dashboard, said when a run starts and when it finishes, so
that a researcher can click straight into it.

One line each, at INFO, through the `treeline.link` logger. Unconfigured, Python's
logging shows warnings only, which would hide these lines exactly where they are
wanted; so the level that decides is one set on the SDK's own loggers
(`treeline.link`, then `treeline`), INFO when there is none, and with no handler
anywhere a line goes to stderr, as logging's last resort does for warnings."""

import logging
import sys
import urllib.parse

log = logging.getLogger("treeline.link")


class _Stderr(logging.StreamHandler):
    """Writes to the sys.stderr of the moment (a test, a notebook may swap it)."""

    def __init__(self):
        logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr


_fallback = _Stderr()


def page(url, run_id):
    """The Run Detail page of `run_id` on the server at `url` (the app's /runs/:run_id)."""
    return "%s/runs/%s" % (url, urllib.parse.quote(run_id, safe=""))


def say_page(run, what):
    """`treeline: run 'name' (id) started: http://host:3000/runs/id`, unless the run
    is quiet. Data that could not be sent is said apart, with where it waits."""
    if run.quiet:
        return
    label = run.run_id if run.name is None else "%r (%s)" % (run.name, run.run_id)
    say("treeline: run %s %s: %s", label, what, page(run.url, run.run_id))


def say(message, *args):
    if logging.root.manager.disable >= logging.INFO or _level() > logging.INFO:
        return
    fn, lno, func, _ = log.findCaller()
    record = log.makeRecord(log.name, logging.INFO, fn, lno, message, args, None, func)
    (log.handle if log.hasHandlers() else _fallback.handle)(record)


def _level():
    """The level set on the SDK's loggers, else INFO: the root's default of WARNING
    is no one asking for quiet."""
    logger = log
    while logger is not None and logger is not logging.root:
        if logger.level:
            return logger.level
        logger = logger.parent
    return logging.INFO
