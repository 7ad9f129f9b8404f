"""jobgen itself inside the containers: the wheel built from this worktree, installed offline
into /opt/jobgen with /usr/bin/jobgen, runs under each systemd release's own Python."""

import pytest

from jobgen import __version__

pytestmark = pytest.mark.e2e


def test_jobgen_runs_inside_the_container(systemd_jobgen):
    out = systemd_jobgen.run("jobgen", "--version").stdout
    assert out.strip() == f"jobgen {__version__}"
    # The installed copy, not a path into the worktree: the container cannot see the host.
    where = systemd_jobgen.run("readlink", "-f", "/usr/bin/jobgen").stdout.strip()
    assert where == "/opt/jobgen/bin/jobgen"
    # It renders with its own templates (packaged in the wheel) under the container's Python.
    manifest = "jobgen: 1\njobs:\n  hello:\n    command: [/bin/true]\n    schedule: daily\n"
    systemd_jobgen.write_file("/root/hello.yaml", manifest)
    systemd_jobgen.run("jobgen", "render", "/root/hello.yaml", "-o", "/root/out", "--systemd", systemd_jobgen.release)
    assert "hello.timer" in systemd_jobgen.run("ls", "/root/out").stdout.split()
