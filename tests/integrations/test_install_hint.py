"""How a missing client library is reported: with the command that adds it to the jobgen that
runs, for each way jobgen is installed (README: Install). `pip install 'jobgen[redis]'` is
never the advice: jobgen is not on the package index.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from jobgen.contract.locks import DEBIAN_PACKAGES, SCHEMES
from jobgen.runtime import installed

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package_file, prefix, base, how", [
    ("/usr/lib/python3/dist-packages/jobgen/__init__.py", "/usr", "/usr", installed.DEBIAN),
    ("/usr/local/lib/python3.11/dist-packages/jobgen/__init__.py", "/usr", "/usr", installed.SYSTEM),
    ("/opt/jobgen/lib/python3.11/site-packages/jobgen/__init__.py", "/opt/jobgen", "/usr", installed.VENV),
])  # fmt: skip
def test_how_installed_by_where_jobgen_lives(package_file, prefix, base, how) -> None:
    assert installed.how_installed(package_file, prefix, base) == how


def test_a_pipx_virtualenv_is_known_by_its_metadata_file(tmp_path: Path) -> None:
    venv = tmp_path / "pipx/venvs/jobgen"
    venv.mkdir(parents=True)
    lib = str(venv / "lib/python3.11/site-packages/jobgen/__init__.py")
    assert installed.how_installed(lib, str(venv), "/usr") == installed.VENV
    (venv / "pipx_metadata.json").write_text("{}")
    assert installed.how_installed(lib, str(venv), "/usr") == installed.PIPX


@pytest.mark.parametrize("how, expected", [
    (installed.DEBIAN, "apt install python3-redis"),
    (installed.VENV, f"{sys.prefix}/bin/python -m pip install 'redis>=5'"),
    (installed.SYSTEM, "python3 -m pip install --user 'redis>=5'"),
])  # fmt: skip
def test_the_advice_per_installation(how, expected) -> None:
    assert installed.how_to_get("redis", "redis", how) == expected


def test_the_requirement_is_the_extras_own() -> None:
    # pyproject.toml's optional-dependencies, read from the installed metadata
    assert installed.requirement("redis", "redis") == "redis>=5"
    assert installed.requirement("mariadb", "pymysql") == "pymysql>=1.1"
    assert installed.requirement("postgres", "psycopg") == "psycopg[binary]>=3.1"


def test_every_client_has_a_debian_package_and_the_package_suggests_them() -> None:
    clients = {s.client for s in SCHEMES.values()}
    assert set(DEBIAN_PACKAGES) == clients
    control = (ROOT / "debian/control").read_text()
    suggests = re.search(r"^Suggests: (.*)$", control, re.M)[1]
    assert {p.strip() for p in suggests.split(",")} == set(DEBIAN_PACKAGES.values())


def test_no_message_or_document_advises_installing_jobgen_from_the_index() -> None:
    # jobgen is not on the package index: `pip install 'jobgen[...]'` fails everywhere
    texts = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("src/jobgen/**/*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in texts if re.search(r"pip install\s+['\"]?jobgen\[", p.read_text())]
    assert offenders == []
