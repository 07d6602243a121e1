"""The run's dashboard page, said once when a run starts and once when it finishes,
built from the URL the SDK was given, and quiet when asked."""

import logging
import os
import subprocess
import sys

import pytest

import treeline as tl

URL = "http://dash.example:8080"


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "treeline.link"]


def test_start_and_finish_each_say_the_run_detail_page(make_run, caplog):
    run = make_run(url=URL + "/", name="ppo-seed-42")  # the trailing slash is dropped
    page = "%s/runs/%s" % (URL, run.run_id)
    assert _lines(caplog) == ["treeline: run 'ppo-seed-42' (%s) started: %s" % (run.run_id, page)]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "treeline.link")
    run.finish("failed")
    run.finish()  # a second finish does nothing, and says nothing
    assert _lines(caplog)[1:] == ["treeline: run 'ppo-seed-42' (%s) failed: %s"
                                  % (run.run_id, page)]


def test_the_url_comes_from_the_environment_when_not_given(make_run, caplog, monkeypatch):
    monkeypatch.setenv("TREELINE_URL", "https://treeline.lab.example")
    run = make_run()
    assert _lines(caplog) == ["treeline: run %s started: https://treeline.lab.example/runs/%s"
                              % (run.run_id, run.run_id)]


def test_a_joined_run_says_it_joined(make_run, caplog):
    run = make_run(url=URL, run_id="shared-run-1")
    assert _lines(caplog) == ["treeline: run shared-run-1 joined: %s/runs/shared-run-1" % URL]


@pytest.mark.parametrize("how", ["option", "env", "sdk logger level", "link logger level"])
def test_quiet_when_asked(make_run, caplog, monkeypatch, how):
    options = {}
    if how == "option":
        options["quiet"] = True
    elif how == "env":
        monkeypatch.setenv("TREELINE_QUIET", "1")
    elif how == "sdk logger level":
        caplog.set_level(logging.WARNING, logger="treeline")
    else:
        caplog.set_level(logging.WARNING, logger="treeline.link")
    run = make_run(url=URL, **options)
    run.finish()
    assert _lines(caplog) == []


def test_quiet_false_overrides_the_environment(make_run, caplog, monkeypatch):
    monkeypatch.setenv("TREELINE_QUIET", "1")
    make_run(url=URL, quiet=False)
    assert len(_lines(caplog)) == 1


def test_a_switched_off_run_says_nothing(caplog):
    run = tl.init("p", url=URL, disabled=True)
    run.finish()
    assert _lines(caplog) == []


def test_without_logging_configured_the_lines_reach_stderr(tmp_path):
    # What a new user sees: nothing configures logging, whose default shows warnings
    # only; the lines are said anyway. The run exits unfinished, so exit finishes it.
    code = ("import treeline as tl\n"
            "run = tl.init('p', url=%r, spool_dir=%r, max_retries=0, timeout=0.5)\n"
            "print(run.run_id)\n" % ("http://127.0.0.1:9", str(tmp_path)))
    env = dict(os.environ, TREELINE_EXIT_TIMEOUT="3")
    env.pop("TREELINE_QUIET", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    page = "http://127.0.0.1:9/runs/" + run_id
    said = [line for line in out.stderr.splitlines() if page in line]
    assert said == ["treeline: run %s started: %s" % (run_id, page),
                    "treeline: run %s finished: %s" % (run_id, page)], out.stderr
