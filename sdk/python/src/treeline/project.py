"""Tracing into a project without a run of its own (a service, an evaluator that
runs every night): the traces go to the project's run of the day, which the server
also gives that project's OpenTelemetry spans, so both are found in one place. The
run is asked for when the tracer is made and again on the first trace of each new
UTC day; a trace stays whole in the run its root opened in."""

import datetime
import hashlib
import logging
import threading
import time
import urllib.parse

from .client import Client
from .errors import InvalidValue, TreelineError
from .ids import new_key
from .roots import Roots
from .run import Run, _env_flag
from .transport import Unreachable
from .vocab import ROOT_KIND

log = logging.getLogger("treeline")

# Asking for the run must not hold a service's start for long: one answer within
# this many seconds, one more try after a 503, else the fallback.
PLACE_TIMEOUT = 5.0


class ProjectTracer(Roots):
    """Made by `treeline.tracer(project)`. Its roots (trace, agent_trace,
    model_trace) open in the project's run of the day; spans nest under them as in a
    run. Its options (url, api_key, capture, sample_rate, spool_dir, quiet...) are a
    run's. It never finishes the runs of the day: the server finishes each once its
    day is over."""

    def __init__(self, project, *, url=None, api_key=None, **options):
        if "run_id" in options or "name" in options or "config" in options:
            raise InvalidValue("a project tracer writes to the project's run of the day; "
                               "it takes no run_id, name or config (use treeline.init "
                               "for a run of your own)")
        self.project = project
        self._options = dict(options, url=url, api_key=api_key, finish_on_exit=False)
        self._lock = threading.Lock()
        self._runs = []
        self._day = None
        self._run = None
        disabled = options.get("disabled")
        self._inert = _env_flag("TREELINE_OFF") if disabled is None else bool(disabled)
        # Placed now: a wrong URL, key or project raises here, at setup, rather than
        # in the middle of the job.
        self._client = None if self._inert else Client(url, api_key, timeout=PLACE_TIMEOUT)
        self._today(raise_errors=True)

    @property
    def run(self):
        """The run today's traces go to (a `treeline.Run`)."""
        return self._today()

    @property
    def run_id(self):
        return self._today().run_id

    def trace(self, name, kind=ROOT_KIND, *, step=None, **kw):
        """A new trace in the project's run of the day. A project's traces have no
        training step, so `step=` is refused."""
        if step is not None:
            raise InvalidValue("a project tracer's traces have no step; use "
                               "treeline.init(...) for a run with steps")
        return self._today().trace(name, kind, **kw)

    def span(self, name, kind="custom", **kw):
        """A child of the active span of today's run, else a new trace."""
        return self._today().span(name, kind, **kw)

    def flush(self, timeout=30):
        """Sends what every run of the tracer holds; True when all of it went."""
        with self._lock:
            runs = list(self._runs)
        return all([run.flush(timeout) for run in runs])

    def close(self, timeout=30):
        """Flushes. The runs stay open: the server finishes each once its day is over."""
        return self.flush(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _today(self, raise_errors=False):
        day = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        with self._lock:
            if self._run is not None and day == self._day:
                return self._run
            run_id = self._place(day, raise_errors)
            if run_id is None:  # kept where it was: asking again failed
                return self._run
            self._run = Run(self.project, run_id=run_id, **self._options)
            self._runs.append(self._run)
            self._day = day
            return self._run

    def _place(self, day, raise_errors):
        """The run id the server gives the project today; without a server, the id
        it would give (the daily id when no other project holds it). None when a
        later day's request was refused: the tracer stays in its current run."""
        if self._inert:
            return daily_run_id(self.project, day)
        path = "/api/projects/%s/daily-run" % urllib.parse.quote(self.project, safe="")
        try:
            return self._ask(path)["run_id"]
        except Unreachable as err:
            log.warning("treeline: %s; writing project %r's traces to %s, its run of the "
                        "day when no other project holds that id", err, self.project,
                        daily_run_id(self.project, day))
            return daily_run_id(self.project, day)
        except TreelineError as err:
            if raise_errors or self._run is None:
                raise
            log.warning("treeline: %s; today's traces stay in run %s", err, self._run.run_id)
            return None


    def _ask(self, path):
        """The server's answer to the POST, tried again once after a 503."""
        data, key = b"{}", new_key()
        for attempt in range(2):
            status, body, wait = self._client._request(path, "POST", data, key)
            if status == 503 and attempt == 0:
                time.sleep(min(2.0, 1.0 if wait is None else wait))
                continue
            break
        return self._client._answer("POST", path, status, body)


def daily_run_id(project, day):
    """The id the server gives `project`'s run of `day` (YYYY-MM-DD): the project as
    an id (outside [A-Za-z0-9._-] a dash, dashes collapsed, leading non-alphanumerics
    dropped, 40 characters), with 8 hex digits of its SHA-256 when that changed it."""
    slug = ""
    for c in project:
        c = c if (c.isascii() and c.isalnum()) or c in "._-" else "-"
        if not (c == "-" and slug.endswith("-")):
            slug += c
    slug = slug.lstrip("".join(c for c in slug if not (c.isascii() and c.isalnum())))[:40]
    if slug != project:
        short = hashlib.sha256(project.encode()).hexdigest()[:8]
        slug = "%s-%s" % (slug, short) if slug else "otel-%s" % short
    return "%s-%s" % (slug, day)


def tracer(project, *, url=None, api_key=None, **options):
    """A tracer for `project` alone, with no run of its own: its traces go to the
    project's run of the day (see ProjectTracer). Asks the server for that run now;
    raises for a URL, key or project that cannot work (a project key of another
    project: tl.ApiError 403)."""
    return ProjectTracer(project, url=url, api_key=api_key, **options)
