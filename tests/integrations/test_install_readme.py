"""README's Install section, followed on fresh Debian 12 (systemd 252) and Debian 13 (systemd
257) containers: the commands are read from the README, not restated here, and each route ends
with `jobgen --version` working for root and for a user in a login shell.

- the .deb: built in the container from the checkout as "jobgen's own package" says (its
  build dependencies with apt-get, then dpkg-buildpackage, with that release's own tools),
  installed with `apt install ./jobgen_0.1.0_all.deb`: /usr/bin/jobgen for everyone, the
  generator linked into systemd's generator folder; a missing client library is reported as
  `apt install python3-redis`;
- pipx as root (PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin): /usr/local/bin/jobgen for
  everyone, the generator linked as the Generator section says; the hint is `PIPX_HOME=/opt/pipx pipx inject jobgen 'redis>=5'`;
- pipx as a user: ~/.local/bin/jobgen for that user.

The containers reach the Debian mirror (apt) and no Python package index: pip inside pipx
gets PIP_NO_INDEX=1 and PIP_FIND_LINKS (a wheelhouse of jobgen's dependencies, hatchling and pip,
downloaded on this host) from the environment, so the README's commands run as written.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the container harness

from container import RELEASES, Container, ensure_rootfs_all, missing_prerequisites, rootfs_python, wheelhouse  # noqa: E402
from test_debian_generator import checkout_files  # noqa: E402
from integration_support import ROOT  # noqa: E402

pytestmark = pytest.mark.e2e

WHEELS = "/var/tmp/jobgen-wheels"
OFFLINE = f"PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELS}"
URL = "redis://127.0.0.1:1/0"  # never reached: the client library is missing first


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n{title}\n")
    return text[start:text.index("\n## ", start + 1)]


def readme_commands() -> dict[str, str]:
    """The README's commands by route: 'apt-pipx', 'root', 'user', 'build-deps', 'build',
    'deb', 'link-generator'."""
    install = section("## Install")
    blocks = re.findall(r"```sh\n(.*?)```", install, re.S)
    pipx_lines = [line for line in blocks[0].splitlines() if line and not line.startswith("#")]
    (root,) = [line for line in pipx_lines if line.startswith("PIPX_HOME=")]
    (user,) = [line for line in pipx_lines if line.startswith("pipx install")]
    (deb,) = [line for line in blocks[1].splitlines() if line.startswith("apt install ./")]
    (apt_pipx,) = re.findall(r"`(apt install pipx)`", install)
    own = section("### jobgen's own package")
    (build_deps,) = [" ".join(c.split()) for c in re.findall(r"`(apt-get install [^`]+)`", own)]
    (build,) = [line.split("#")[0].strip() for line in re.findall(r"```sh\n(.*?)```", own, re.S)[0].splitlines() if line.startswith("dpkg-buildpackage")]
    (link,) = [line for line in re.findall(r"```sh\n(.*?)```", section("## Generator"), re.S)[0].splitlines() if "ln -s" in line]
    return {"apt-pipx": apt_pipx, "root": root, "user": user, "build-deps": build_deps, "build": build, "deb": deb, "link-generator": link}


# Where the package links the generator (README: Generator): /lib on Debian 12, /usr/lib on 13.
GENERATOR = {"252": "/lib/systemd/system-generators/jobgen-generator", "257": "/usr/lib/systemd/system-generators/jobgen-generator"}


def build_wheelhouse(python: str, dest: Path) -> list[Path]:
    """jobgen's dependencies (container.wheelhouse), hatchling to build the checkout, and pip
    (pipx 1.7, Debian 13's, upgrades the pip of its shared libraries first)."""
    deps = wheelhouse(ROOT, python)
    build = dest / f"build-{python}"
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--dest", str(build), "--only-binary=:all:",
                        "--python-version", python, "hatchling>=1.18", "pip>=23.1"], capture_output=True, text=True, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return sorted([*deps.glob("*.whl"), *build.glob("*.whl")])


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith("/bootstrap") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def as_login(c: Container, user: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    """`script` in a login shell of `user` (its profile's PATH), as after `ssh user@host`."""
    return c.run("runuser", "-l", user, "-c", script, check=check, timeout=900)


@pytest.mark.parametrize("release", sorted(RELEASES), ids=lambda r: f"systemd{r}")
def test_readme_install_section_works_for_root_and_a_user(release: str, tmp_path: Path) -> None:
    suite = RELEASES[release]
    if reason := missing_prerequisites([suite]):
        pytest.skip(reason)
    ensure_rootfs_all([suite])
    commands = readme_commands()
    wheels = build_wheelhouse(rootfs_python(suite), tmp_path)
    checkout = {f"jobgen/{f}": (ROOT / f).read_bytes() for f in checkout_files()}

    c = Container(release, private_network=False).boot()
    try:
        c.run("/bin/sh", "-c", "apt-get update -qq", timeout=600)
        c.run("useradd", "-m", "-s", "/bin/bash", "alice")  # a user who installs nothing
        c.run("useradd", "-m", "-s", "/bin/bash", "bob")  # a user who installs for themself
        for home in ("/root", "/home/bob"):
            c.run("tar", "-x", "-C", home, input=tar_of(checkout), binary=True)
        c.run("chown", "-R", "bob:bob", "/home/bob/jobgen")

        # The .deb: built from the checkout with this release's own tools ("plus systemd-dev on
        # Debian 13"), installed with apt (which brings its dependencies)
        deps = commands["build-deps"] + (" systemd-dev" if release != "252" else "")
        as_login(c, "root", f"DEBIAN_FRONTEND=noninteractive {deps} -y -qq --no-install-recommends")
        as_login(c, "root", f"cd /root/jobgen && {commands['build']}")
        as_login(c, "root", f"cd /root && DEBIAN_FRONTEND=noninteractive {commands['deb']} -y -qq")
        for user in ("root", "alice"):
            assert as_login(c, user, "command -v jobgen && jobgen --version").stdout.split() == ["/usr/bin/jobgen", "jobgen", "0.1.0"]
        assert c.run("readlink", "-f", GENERATOR[release]).stdout.strip() == "/usr/bin/jobgen-generator"
        c.run("test", "-x", GENERATOR[release])
        c.run("test", "-f", "/usr/share/man/man5/jobgen.yaml.5.gz")  # where man finds it once man-db is installed
        hint = as_login(c, "root", f"jobgen lock --backend {URL} --name n -- true", check=False)
        assert hint.returncode == 78 and "apt install python3-redis" in hint.stderr, hint.stderr
        c.run("/bin/sh", "-c", "DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq jobgen", timeout=300)
        assert c.run("test", "-e", GENERATOR[release], check=False).returncode == 1

        # pipx, from a checkout: as root for the whole host, then as a user for themself
        as_login(c, "root", f"DEBIAN_FRONTEND=noninteractive {commands['apt-pipx']} -y -qq")
        c.run("/bin/sh", "-c", f"rm -rf {WHEELS} && mkdir -p {WHEELS}")
        c.run("tar", "-x", "-C", WHEELS, input=tar_of({w.name: w.read_bytes() for w in wheels}), binary=True)

        as_login(c, "root", f"cd /root/jobgen && {OFFLINE} {commands['root']}")
        for user in ("root", "alice"):
            assert as_login(c, user, "command -v jobgen && jobgen --version").stdout.split() == ["/usr/local/bin/jobgen", "jobgen", "0.1.0"]
        as_login(c, "root", commands["link-generator"])
        assert c.run("readlink", "-f", "/etc/systemd/system-generators/jobgen-generator").stdout.strip() == "/opt/pipx/venvs/jobgen/bin/jobgen-generator"
        hint = as_login(c, "root", f"jobgen lock --backend {URL} --name n -- true", check=False)
        assert hint.returncode == 78 and "PIPX_HOME=/opt/pipx pipx inject jobgen 'redis>=5'" in hint.stderr, hint.stderr
        render = as_login(c, "alice", "printf 'jobgen: 1\\njobs:\\n  b:\\n    command: [/bin/true]\\n    schedule: daily\\n' > j.yaml && jobgen render j.yaml -o out")
        assert "create    out/b.timer" in render.stdout, render.stdout + render.stderr

        as_login(c, "bob", f"cd ~/jobgen && {OFFLINE} {commands['user']}")
        # a new login shell: ~/.profile puts ~/.local/bin first on PATH now that it exists
        assert as_login(c, "bob", "command -v jobgen && jobgen --version").stdout.split() == ["/home/bob/.local/bin/jobgen", "jobgen", "0.1.0"]
        hint = as_login(c, "bob", f"jobgen lock --backend {URL} --name n -- true", check=False)
        assert hint.returncode == 78 and "\npipx inject jobgen 'redis>=5'" in "\n" + hint.stderr.split(": ")[-1], hint.stderr
    finally:
        c.halt()
