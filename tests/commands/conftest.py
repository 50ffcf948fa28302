"""Command tests: every test leaves caffepy's logger and compute mode as it found them."""
import pytest


@pytest.fixture(autouse=True)
def _restore_log_and_mode():
    yield
    import caffepy
    from caffepy.log import teardown as teardown_log
    teardown_log()
    caffepy.set_mode_cpu()
