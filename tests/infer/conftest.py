"""Every inference-mode test keeps auto's choices in a file of its own (never the user's cache,
never a choice made by an earlier test)."""
import pytest


@pytest.fixture(autouse=True)
def _engine_cache(tmp_path, monkeypatch):
    from caffepy.infer import choice
    path = tmp_path / "infer_engines.json"
    monkeypatch.setenv(choice.FILE_ENV, str(path))
    return path
