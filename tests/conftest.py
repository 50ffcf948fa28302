"""Shared fixtures: where ../shared is (tests needing it skip cleanly without it)."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("CAFFEPY_SHARED", os.path.join(ROOT, "..", "shared"))


def shared_path(*parts):
    """Path under ../shared, or skip the test when it is absent."""
    p = os.path.join(SHARED, *parts)
    if not os.path.exists(p):
        pytest.skip("needs ../shared/%s" % "/".join(parts))
    return p


@pytest.fixture
def shared():
    return shared_path


@pytest.fixture(autouse=True)
def _caffepy_logger_restored():
    """Each test starts with the caffepy logger as the test session had it: a command run in
    process (``log.setup``: own handlers, no propagation) must not hide later tests' records from
    ``caplog``."""
    import logging
    logger = logging.getLogger("caffepy")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    for h in list(logger.handlers):
        if h not in saved[0]:
            logger.removeHandler(h)
            if isinstance(h, logging.FileHandler):
                h.close()
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


@pytest.fixture
def user_pyloss(monkeypatch):
    """Module ``pyloss`` is tests/fixtures/pyloss.py (a user's copy of BVLC's example layer, which
    wins over caffepy's built-in stand-in); afterwards later tests get the built-in again."""
    import sys
    monkeypatch.syspath_prepend(os.path.join(ROOT, "tests", "fixtures"))
    monkeypatch.delitem(sys.modules, "pyloss", raising=False)
    yield "pyloss"
    sys.modules.pop("pyloss", None)


@pytest.fixture(autouse=True)
def _user_schema_reset():
    """No test sees a fork schema (caffepy.load_schema / --proto) that an earlier test loaded."""
    yield
    from caffepy.proto import user_schema
    user_schema.reset()


def pytest_collection_modifyitems(session, config, items):
    """The tests that wait for a background chain run after all others (tests/background.py)."""
    from tests import background
    items[:] = background.last(items, background.key)


def pytest_terminal_summary(terminalreporter):
    from tests import background
    for line in background.report():
        terminalreporter.write_line(line)


def pytest_collection_finish(session):
    """Start the background chains (tests/background.py) of the selected tests."""
    import tempfile
    from tests import background
    if session.config.option.collectonly or not session.items:
        return
    session.config._background_tmp = tempfile.mkdtemp(prefix="caffepy-background-")
    background.start([background.key(item) for item in session.items],
                     session.config._background_tmp)


def pytest_sessionfinish(session):
    import shutil
    from tests import background
    background.stop()
    tmp = getattr(session.config, "_background_tmp", None)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
