"""Fixtures shared by the test files."""
import faulthandler, os, sys

import pytest

from achilles.core.data import Schema, load_adult

# A test that blocks (a FIFO whose ends never meet, a worker that never answers) ends the run with every thread's traceback
# after this many seconds, instead of holding CI until its 90-minute limit with nothing said. The slowest test takes about
# a minute on 2 cores; ACHILLES_TEST_DEADLINE_S=0 turns the deadline off (a debugger session).
TEST_DEADLINE_S = float(os.environ.get("ACHILLES_TEST_DEADLINE_S", "1200"))


def _terminal(config):
    "The run's real standard error: pytest captures fd 2 during a test, and a dump written there would be thrown away at the exit."
    capturing = getattr(config.pluginmanager.getplugin("capturemanager"), "_global_capturing", None)
    saved = getattr(getattr(capturing, "err", None), "targetfd_save", None)  # pytest's copy of the original fd 2 (not public)
    return saved if isinstance(saved, int) else sys.__stderr__


@pytest.fixture(autouse=True)
def _deadline(request):
    "Dump every thread's stack to the terminal and exit (status 1) when one test runs past `TEST_DEADLINE_S`."
    if TEST_DEADLINE_S <= 0: yield; return
    faulthandler.dump_traceback_later(TEST_DEADLINE_S, exit=True, file=_terminal(request.config))
    try: yield
    finally: faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def adult():
    "The bundled Adult data and its schema (loaded once per test session)."
    df = load_adult()
    return df, Schema.from_dataframe(df)
