"""The stress suite: every test here is marked ``stress``. ``pytest tests`` runs the short
version (seconds); ``pytest tests/stress --long`` runs the full one (minutes)."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/stress/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.stress)


@pytest.fixture
def long(request) -> bool:
    """Whether the full stress suite was asked for (``--long``)."""
    return request.config.getoption("--long")
