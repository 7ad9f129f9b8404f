"""`jobgen import-crontab --host --root IMAGE`: a host's whole cron as manifests and one report.

Each test builds an image root in tmp_path (Debian's /etc/crontab as shipped, from
tests/crontabs/etc/crontab) and runs the real command on it; the report lines, the exit code
and the files written are the expectations.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEBIAN_CRONTAB = (ROOT / "tests" / "crontabs" / "etc" / "crontab").read_text()
# Debian 12's /etc/cron.d/e2scrub_all (e2fsprogs), as shipped.
E2SCRUB = """\
30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron
10 3 * * * root test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r
"""
SKIP = "cron skips it: a name of letters, digits, '_' and '-' only is read (run-parts(8), Debian cron(8))"
REVIEW = ("hardening: none and overlap: skip: cron ran these jobs without a sandbox and started a run while the last "
          "one was still going (README: import-crontab)")


def _jobgen(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "jobgen", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def _put(root: Path, rel: str, text: str | bytes, mode: int = 0o644) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    path.chmod(mode)
    return path


@pytest.fixture
def image(tmp_path) -> Path:
    """A Debian host without anacron: /etc/crontab, e2scrub_all, two cron.daily scripts and
    the names cron skips, and a user crontab owned by its user."""
    root = tmp_path / "image"
    _put(root, "etc/crontab", DEBIAN_CRONTAB)
    _put(root, "etc/cron.d/e2scrub_all", E2SCRUB)
    for skipped in (".placeholder", "e2scrub_all~", "e2scrub_all.dpkg-old"):
        _put(root, f"etc/cron.d/{skipped}", E2SCRUB)
    _put(root, "etc/cron.daily/dpkg", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "etc/cron.daily/apt-compat", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "etc/cron.daily/README", "not a script\n")
    _put(root, "etc/cron.daily/old.sh", "#!/bin/sh\n", 0o755)
    _put(root, "etc/passwd", f"root:x:0:0::/root:/bin/sh\nshop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
    _put(root, "etc/timezone", "Etc/UTC\n")
    _put(root, "var/spool/cron/crontabs/shop", "# shop\n*/10 * * * * /usr/local/bin/sync-stock --quiet\n", 0o600)
    (tmp_path / "out").mkdir()
    return root


def test_a_debian_host_becomes_one_manifest_per_source_and_one_report(image, tmp_path):
    out = tmp_path / "out"
    r = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(out))
    assert r.returncode == 0, r.stderr
    img = str(image)
    assert r.stdout.splitlines() == [
        f"{img}/etc/cron.d/.placeholder: ignored: {SKIP}",
        f"{img}/etc/cron.d/e2scrub_all.dpkg-old: ignored: {SKIP}",
        f"{img}/etc/cron.d/e2scrub_all~: ignored: {SKIP}",
        f"{img}/etc/cron.daily/README: ignored: run-parts skips it: not an executable regular file",
        f"{img}/etc/cron.daily/old.sh: ignored: {SKIP}",
        f"{img}/etc/crontab:19: mapped: runs /etc/cron.hourly with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        f"{img}/etc/crontab:20: mapped: runs /etc/cron.daily with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        f"{img}/etc/crontab:21: mapped: runs /etc/cron.weekly with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        f"{img}/etc/crontab:22: mapped: runs /etc/cron.monthly with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        # `test -e /run/systemd/system || ...`: named after what runs, not after the guard's path
        f"{img}/etc/cron.d/e2scrub_all:1: translated: e2scrub-all-e2scrub-all-cron-l1 in cron.d-e2scrub_all.yaml",
        f"{img}/etc/cron.d/e2scrub_all:2: translated: e2scrub-all-e2scrub-all-l2 in cron.d-e2scrub_all.yaml",
        f"{img}/etc/cron.d/e2scrub_all: needs review: 2 jobs in cron.d-e2scrub_all.yaml: {REVIEW}",
        f"{img}/etc/cron.daily/apt-compat: translated: cron-daily-apt-compat in cron.daily.yaml",
        f"{img}/etc/cron.daily/dpkg: translated: cron-daily-dpkg in cron.daily.yaml",
        f"{img}/etc/cron.daily: needs review: 2 jobs in cron.daily.yaml: {REVIEW}",
        f"{img}/var/spool/cron/crontabs/shop:2: translated: shop-sync-stock-l2 in user-shop.yaml",
        f"{img}/var/spool/cron/crontabs/shop: needs review: 1 job in user-shop.yaml: {REVIEW}",
    ]
    assert r.stderr == f"jobgen: 5 jobs imported into 3 manifests in {out}\n"
    assert sorted(p.name for p in out.iterdir()) == ["cron.d-e2scrub_all.yaml", "cron.daily.yaml", "user-shop.yaml"]
    daily = yaml.safe_load((out / "cron.daily.yaml").read_text())["jobs"]
    # Each script on the schedule of the /etc/crontab line that ran the folder, once.
    assert {n: (j["command"], j["schedule"]) for n, j in daily.items()} == {
        "cron-daily-apt-compat": (["/etc/cron.daily/apt-compat"], "*-*-* 06:25:00"),
        "cron-daily-dpkg": (["/etc/cron.daily/dpkg"], "*-*-* 06:25:00"),
    }
    assert "persistent" not in daily["cron-daily-dpkg"]  # no anacron to catch up
    assert yaml.safe_load((out / "user-shop.yaml").read_text())["jobs"]["shop-sync-stock-l2"]["user"] == "shop"
    check = _jobgen("check", *(str(p) for p in sorted(out.iterdir())))
    assert check.returncode == 0, check.stderr
    # Same host, same bytes: a second import changes nothing and needs no --force.
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(out))
    assert (again.returncode, again.stdout) == (0, r.stdout)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_with_anacron_installed_the_folders_catch_up_and_anacrontab_is_mapped(image, tmp_path):
    _put(image, "usr/sbin/anacron", "#!/bin/sh\n", 0o755)
    _put(image, "etc/anacrontab", "SHELL=/bin/sh\nHOME=/root\n1\t5\tcron.daily\trun-parts --report /etc/cron.daily\n"
                                  "7 10 backup /usr/local/bin/backup\n")
    r = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(tmp_path / "out"))
    assert r.returncode == 1, r.stderr
    img = str(image)
    lines = r.stdout.splitlines()
    assert (f"{img}/etc/crontab:20: mapped: runs /etc/cron.daily with run-parts when anacron is not installed; anacron "
            "is, and runs it: the folder's scripts are imported once, from the folder, at this line's time with "
            "persistent: true") in lines
    assert (f"{img}/etc/anacrontab:3: mapped: runs /etc/cron.daily with run-parts: the folder's scripts are imported "
            "once, from the folder, at the time of the /etc/crontab line that runs it") in lines
    assert (f"{img}/etc/anacrontab:4: refused: anacron runs a job once every N days counted from its last run, which "
            "is no calendar: translate it by hand (a schedule with persistent: true)") in lines
    daily = yaml.safe_load((tmp_path / "out" / "cron.daily.yaml").read_text())["jobs"]
    assert daily["cron-daily-dpkg"]["persistent"] is True
    assert r.stderr == f"jobgen: 5 jobs imported into 3 manifests in {tmp_path / 'out'}; 1 refused\n"


def test_hostile_files_are_one_line_each_and_the_rest_is_imported(image, tmp_path):
    img = str(image)
    _put(image, "etc/cron.d/binary", b"\x7fELF\x00\x01")
    _put(image, "etc/cron.d/latin1", "# caf\xe9\n".encode("latin-1"))
    with open(image / "etc/cron.d/huge", "wb") as f:
        f.truncate((1 << 20) + 1)
    os.mkfifo(image / "etc/cron.d/fifo")
    (image / "etc/cron.d/folder").mkdir()
    os.symlink("loop", image / "etc/cron.d/loop")
    os.symlink("/etc/passwd", image / "etc/cron.d/outside")
    os.symlink("../../../..", image / "etc/cron.d/escape")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 1, r.stderr
    refused = [line for line in r.stdout.splitlines() if ": refused: " in line]
    assert refused == [
        f"{img}/etc/cron.d/binary: refused: a binary file (it holds NUL bytes), not a crontab",
        f"{img}/etc/cron.d/escape: refused: it leads out of the root (to {os.path.realpath(tmp_path.parent)}); "
        "jobgen does not read through it",
        f"{img}/etc/cron.d/fifo: refused: not a regular file",
        f"{img}/etc/cron.d/folder: refused: not a regular file",
        f"{img}/etc/cron.d/huge: refused: 1048577 bytes, more than a crontab's 1048576: not read",
        f"{img}/etc/cron.d/latin1: refused: not UTF-8 text (byte 5)",
        f"{img}/etc/cron.d/loop: refused: cannot be read: a loop of symbolic links",
        f"{img}/etc/cron.d/outside: refused: it leads out of the root (to /etc/passwd); jobgen does not read through it",
    ]
    assert r.stderr == f"jobgen: 5 jobs imported into 3 manifests in {tmp_path / 'out'}; 8 refused\n"
    assert "Traceback" not in r.stderr


def test_a_file_name_that_is_not_text_is_shown_escaped_on_one_line(image, tmp_path):
    img = str(image)
    _put(image, "etc/cron.d/multi\nline", "* * * * * root /bin/true\n")
    (image / "etc/cron.d").joinpath(os.fsdecode(b"bad\xffname")).write_text("* * * * * root /bin/true\n")
    (image / "var/spool/cron/crontabs").joinpath(os.fsdecode(b"u\xff")).write_text("* * * * * /bin/true\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    assert f"{img}/etc/cron.d/bad\\xffname: ignored: {SKIP}" in lines
    assert f"{img}/etc/cron.d/multi\\nline: ignored: {SKIP}" in lines
    assert f"{img}/var/spool/cron/crontabs/u\\xff: refused: cron skips it: no user 'u\\xff' in {img}/etc/passwd (cron: ORPHAN)" in lines
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_a_user_crontab_cron_would_skip_is_refused(image, tmp_path):
    img = str(image)
    _put(image, "var/spool/cron/crontabs/ghost", "* * * * * /bin/true\n")
    _put(image, "var/spool/cron/crontabs/.tmp-crontab", "* * * * * /bin/true\n")
    _put(image, "etc/passwd", f"root:x:0:0::/root:/bin/sh\nshop:x:{os.getuid() + 1}:100::/home/shop:/bin/sh\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    assert f"{img}/var/spool/cron/crontabs/.tmp-crontab: ignored: cron skips it: a hidden file (crontab(1)'s temporary files)" in lines
    assert f"{img}/var/spool/cron/crontabs/ghost: refused: cron skips it: no user 'ghost' in {img}/etc/passwd (cron: ORPHAN)" in lines
    assert (f"{img}/var/spool/cron/crontabs/shop: refused: cron skips it: owned by uid {os.getuid()}, not by shop "
            f"(uid {os.getuid() + 1}; cron: WRONG FILE OWNER)") in lines
    assert r.returncode == 1 and not (tmp_path / "out" / "user-shop.yaml").exists()


@pytest.mark.parametrize(("setup", "args", "code", "message"), [
    (lambda t: None, ["-o", "{t}/missing"], 73, "jobgen: error: cannot write {t}/missing: it does not exist; nothing written"),
    (lambda t: (t / "file").write_text("x"), ["-o", "{t}/file"], 73, "jobgen: error: cannot write {t}/file: it is not a folder; nothing written"),
    (lambda t: None, ["--root", "{t}/nowhere", "-o", "{t}/out"], 2, "jobgen: error: --root {t}/nowhere: does not exist (give the image's root folder; apply does not make it)"),
    (lambda t: None, ["--zone", "Mars/Olympus", "-o", "{t}/out"], 2, "jobgen: error: --zone Mars/Olympus: not a time zone jobgen knows"),
    (lambda t: None, ["tests/crontabs/shop", "-o", "{t}/out"], 2, "jobgen: error: --host reads the host's crontabs itself: give either FILE or --host"),
    (lambda t: None, ["--user", "shop", "-o", "{t}/out"], 2, "jobgen: error: --host takes each crontab's user and format from where it is: drop --user, --system and --user-crontab"),
])  # fmt: skip
def test_bad_usage_or_output_is_one_line_and_nothing_is_written(image, tmp_path, setup, args, code, message):
    setup(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv = [a.format(t=tmp_path) for a in args]
    r = _jobgen("import-crontab", "--host", *(["--root", str(image)] if "--root" not in argv else []), *argv)
    assert (r.returncode, r.stderr, r.stdout) == (code, message.format(t=tmp_path) + "\n", "")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_root_without_host_is_a_usage_error(image, tmp_path):
    r = _jobgen("import-crontab", "--root", str(image), "-o", str(tmp_path / "out"))
    assert (r.returncode, r.stderr) == (2, "jobgen: error: --root DIR reads an image's crontabs: give --host too\n")


def test_a_changed_manifest_is_not_overwritten_without_force(image, tmp_path):
    out = tmp_path / "out"
    (out / "user-shop.yaml").write_text("# mine\n")
    r = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(out))
    assert (r.returncode, r.stderr, r.stdout) == (
        2, f"jobgen: error: {out}/user-shop.yaml exists and differs; pass --force to overwrite it; nothing written\n", "")
    assert sorted(p.name for p in out.iterdir()) == ["user-shop.yaml"]  # nothing else written either
    assert (out / "user-shop.yaml").read_text() == "# mine\n"
    forced = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "user-shop.yaml").read_text().startswith("# Imported by `jobgen import-crontab`")


# ----------------------------------------------------------------------------- DST, per line


BERLIN_CRONTAB = "30 2 * * * /usr/local/bin/nightly\n*/30 * * * * /usr/local/bin/poll\n30 1 * * * /usr/local/bin/early\n"


def test_each_line_says_what_its_zones_dst_changes_do_differently(image, tmp_path):
    _put(image, "var/spool/cron/crontabs/shop", BERLIN_CRONTAB, 0o600)
    img = str(image)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"), "--zone", "Europe/Berlin")
    shop = [line for line in r.stdout.splitlines() if line.startswith(f"{img}/var/spool/cron/crontabs/shop:")]
    assert shop == [
        f"{img}/var/spool/cron/crontabs/shop:1: translated: shop-nightly-l1 in user-shop.yaml",
        f"{img}/var/spool/cron/crontabs/shop:1: needs review: shop-nightly-l1: DST change on 2028-03-26 (02:00 -> 03:00 "
        "Europe/Berlin): cron makes up a run the change skipped; cron runs 1 more time (03:00 CEST)",
        f"{img}/var/spool/cron/crontabs/shop:2: translated: shop-poll-l2 in user-shop.yaml",
        f"{img}/var/spool/cron/crontabs/shop:2: needs review: shop-poll-l2: DST change on 2028-10-29 (03:00 -> 02:00 "
        "Europe/Berlin): cron runs the repeated minutes again; cron runs 2 more times (02:00 CET, 02:30 CET)",
        f"{img}/var/spool/cron/crontabs/shop:3: translated: shop-early-l3 in user-shop.yaml",  # 01:30: no change then
        f"{img}/var/spool/cron/crontabs/shop: needs review: 3 jobs in user-shop.yaml: {REVIEW}",
    ]
    # Without --zone the image's own zone (Etc/UTC) has no DST: nothing to review.
    utc = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert "DST" not in utc.stdout
    # CRON_TZ wins over --zone.
    _put(image, "var/spool/cron/crontabs/shop", "CRON_TZ=America/New_York\n30 2 * * * /usr/local/bin/nightly\n", 0o600)
    ny = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"), "--zone", "Europe/Berlin", "--force")
    assert (f"{img}/var/spool/cron/crontabs/shop:2: needs review: shop-nightly-l2: DST change on 2028-03-12 (02:00 -> "
            "03:00 America/New_York): cron makes up a run the change skipped; cron runs 1 more time (03:00 EDT)") in ny.stdout.splitlines()


def test_a_single_crontab_gets_the_same_dst_notes(tmp_path):
    src = tmp_path / "shop"
    src.write_text(BERLIN_CRONTAB)
    r = _jobgen("import-crontab", "--user", "shop", str(src), "--zone", "Europe/Berlin", "-o", str(tmp_path / "m.yaml"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"{src}:1: note: DST change on 2028-03-26 (02:00 -> 03:00 Europe/Berlin): cron makes up a run the change "
        "skipped; cron runs 1 more time (03:00 CEST)",
        f"{src}:2: note: DST change on 2028-10-29 (03:00 -> 02:00 Europe/Berlin): cron runs the repeated minutes "
        "again; cron runs 2 more times (02:00 CET, 02:30 CET)",
        "jobgen: 3 jobs imported",
    ]


# ----------------------------------------------------------------------------- names


def test_job_names_are_valid_stable_and_unique_across_the_host(image, tmp_path):
    _put(image, "etc/cron.d/shop", "0 1 * * * root /usr/local/bin/sync-stock --full\n"
                                   "0 2 * * * root cd /srv && ./Weird.Name!.sh\n"
                                   "0 3 * * * root FOO=1 BAR=2\n"
                                   "0 4 * * * root nice -n 10 ionice -c3 /usr/bin/Backup_DB.py --all\n"
                                   "0 5 * * * root /opt/ÄÖü/--x\n"
                                   "0 6 * * * root [ -x /usr/bin/sync-stock ] && if [ ! -d /run/x ]; then /usr/bin/sync-stock; fi\n")
    _put(image, "var/spool/cron/crontabs/shop", "# shop\n0 1 * * * /usr/local/bin/sync-stock --full\n", 0o600)
    _put(image, "etc/cron.d/shop-sync-stock", "# shop\n0 1 * * * root /usr/local/bin/sync-stock --full\n")
    r = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    names = [line.split(": translated: ")[1].split(" in ")[0] for line in r.stdout.splitlines() if ": translated: " in line]
    assert names == [
        "e2scrub-all-e2scrub-all-cron-l1", "e2scrub-all-e2scrub-all-l2",
        "shop-sync-stock-l1", "shop-weird-name-sh-l2", "shop-job-l3", "shop-backup-db-py-l4", "shop-x-l5",
        "shop-sync-stock-l6",
        "shop-sync-stock-sync-stock-l2",
        "cron-daily-apt-compat", "cron-daily-dpkg",
        "shop-sync-stock-l2",
    ]
    check = _jobgen("check", *(str(p) for p in sorted((tmp_path / "out").iterdir())))
    assert check.returncode == 0, check.stderr


def test_links_are_resolved_inside_the_root_never_out_of_it(image, tmp_path):
    img = str(image)
    os.symlink("e2scrub_all", image / "etc/cron.d/alias")  # relative, inside the image: read
    os.symlink("/nonexistent-jobgen/e2scrub_all", image / "etc/cron.d/absolute")  # the host's path: refused
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    assert f"{img}/etc/cron.d/alias:2: translated: alias-e2scrub-all-l2 in cron.d-alias.yaml" in lines
    assert (f"{img}/etc/cron.d/absolute: refused: it leads out of the root (to /nonexistent-jobgen/e2scrub_all); "
            "jobgen does not read through it") in lines
    assert r.returncode == 1
