"""Command tests: every test leaves caffepy's logger and compute mode as it found them."""
import pytest


@pytest.fixture(autouse=True)
def _restore_log_and_mode():
    yield
    import caffepy
    from caffepy import log
    log.teardown()
    caffepy.set_mode_cpu()
