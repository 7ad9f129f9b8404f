"""Fixtures of the integration tests; the helpers are in integration_support.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # whatever pytest's import mode

from integration_support import build_deb  # noqa: E402


@pytest.fixture(scope="session")
def built_deb(tmp_path_factory) -> Path:
    """The .deb of integration_support.MANIFEST, built once per session."""
    return build_deb(tmp_path_factory.mktemp("deb"))
