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
