"""Test-wide settings: the analysis cache goes to a temporary folder, never to ~/.cache."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TPSCOPE_CACHE_DIR", str(tmp_path_factory.mktemp("tpscope-cache")))
    yield
    mp.undo()
