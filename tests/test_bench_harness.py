"""The benchmark harness's pure helpers (bench/harness.py): how a launcher result line is
read, how medians and ratios are shown, and that every tool is given the same jobs.
The benchmarks themselves (bench/run) are never part of the test run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import harness as h  # noqa: E402


def test_a_launcher_line_gives_wall_cpu_rss_and_exit():
    s = h.parse_launch("wall_ns=1500000000 utime_us=250000 stime_us=50000 maxrss_kib=9216 exit=1\n")
    assert (s.wall, s.cpu, s.rss_kib, s.exit) == (1.5, 0.3, 9216, 1)


def test_a_launcher_line_missing_a_field_is_refused_by_name():
    with pytest.raises(ValueError, match="launcher result without maxrss_kib: 'wall_ns=1 utime_us=2 stime_us=3 exit=0'"):
        h.parse_launch("wall_ns=1 utime_us=2 stime_us=3 exit=0")


def test_a_row_shows_cpu_and_wall_medians_with_their_spread_and_the_largest_rss():
    stat = h.Stat("tool", [h.Sample(0.120, 0.050, 2048), h.Sample(0.300, 0.0081, 4096), h.Sample(0.200, 0.040, 1024)])
    assert stat.row() == "| tool | 40.0 (8.1–50.0) | 200 (120–300) | 4.0 MiB |"


def test_ratios_of_medians_and_an_empty_denominator():
    assert (h.ratio(0.3, 0.1), h.ratio(1.0, 0.0)) == ("3.00×", "n/a")


def test_every_tool_gets_the_same_jobs_same_times_commands_and_user():
    manifest = h.jobgen_manifest(5, 2, "daemon", target="252")
    assert manifest == (
        "jobgen: 1\n"
        "target: {systemd: '252'}\n"
        "jobs:\n"
        "  task-00005:\n"
        "    command: [/usr/bin/php, /srv/app/artisan, 'task:5']\n"
        "    schedule: '*-*-* 05:05:00'\n"
        "    user: daemon\n"
        "  task-00006:\n"
        "    command: [/usr/bin/php, /srv/app/artisan, 'task:6']\n"
        "    schedule: '*-*-* 06:06:00'\n"
        "    user: daemon\n"
    )
    assert h.crontab_lines(5, 2, "daemon") == (
        "5 5 * * * daemon /usr/bin/php /srv/app/artisan task:5\n6 6 * * * daemon /usr/bin/php /srv/app/artisan task:6\n"
    )
    assert "Exec=/usr/bin/php /srv/app/artisan task:5\nUser=daemon\n" in h.quadlet_container(5, "daemon")

