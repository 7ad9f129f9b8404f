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
    _put(root, "etc/passwd", f"root:x:0:0::/root:/bin/sh\nwww-data:x:33:33::/var/www:/usr/sbin/nologin\n"
                             f"shop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
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
    # The same run as /etc/crontab:20's (the line leaves the folder to anacron): not a second runner.
    assert (f"{img}/etc/anacrontab:3: mapped: runs /etc/cron.daily with run-parts: the folder's scripts are imported "
            f"once, from the folder, at the time of {img}/etc/crontab:20 (which leaves the folder to anacron) with "
            "persistent: true") in lines
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
    if os.geteuid() == 0:  # only root can give a file away: neither shop's nor root's
        os.chown(image / "var/spool/cron/crontabs/shop", 4243, 4243)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    assert f"{img}/var/spool/cron/crontabs/.tmp-crontab: ignored: cron skips it: a hidden file (crontab(1)'s temporary files)" in lines
    assert f"{img}/var/spool/cron/crontabs/ghost: refused: cron skips it: no user 'ghost' in {img}/etc/passwd (cron: ORPHAN)" in lines
    if os.geteuid() == 0:
        assert (f"{img}/var/spool/cron/crontabs/shop: refused: cron skips it: owned by uid 4243, neither shop's "
                f"(uid {os.getuid() + 1}) nor root's (cron: WRONG FILE OWNER)") in lines
        assert not (tmp_path / "out" / "user-shop.yaml").exists()
    assert r.returncode == 1



def test_a_user_crontab_s_command_that_is_also_a_user_name_is_the_command(image, tmp_path):
    """cron reads every file of its spool as a user crontab: `mail ...` is the command it ran,
    not a user column. It was refused, with advice (--user-crontab) --host does not take."""
    img = str(image)
    _put(image, "etc/passwd", f"root:x:0:0::/root:/bin/sh\nmail:x:8:8::/var/mail:/usr/sbin/nologin\n"
                              f"shop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
    _put(image, "var/spool/cron/crontabs/shop", "0 7 * * * mail -s report ops@example.com < /srv/report.txt\n", 0o600)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout
    assert f"{img}/var/spool/cron/crontabs/shop:1: translated: shop-mail-l1 in user-shop.yaml" in r.stdout.splitlines()
    job = _manifest_jobs(tmp_path / "out", "user-shop.yaml")["shop-mail-l1"]
    assert job["command"] == ["/bin/sh", "-c", "mail -s report ops@example.com < /srv/report.txt"]


def test_a_system_crontab_with_a_line_for_no_user_of_the_image_runs_nothing_on_debian(image, tmp_path):
    """A user the image's /etc/passwd lacks: cron refuses the line ("bad username"); Debian's
    cron then ignores the whole file, so its other lines never ran and are not imported;
    cronie runs the others."""
    planted = "0 1 * * * nosuchuser /usr/local/bin/report\n0 2 * * * root /usr/local/bin/backup\n"
    _put(image, "etc/cron.d/shop", planted)
    r = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(tmp_path / "out"))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert f"{image}/etc/cron.d/shop:1: refused: no user 'nosuchuser' on this host: cron refuses the line (bad username)" in lines
    assert (f"{image}/etc/cron.d/shop:2: refused: cron runs no line of this file: it refuses line 1 (see there), and "
            "Debian's cron then ignores the whole file (\"this crontab file will be ignored\"); not imported (fix line 1 "
            "if these jobs should run)") in lines
    assert not (tmp_path / "out" / "cron.d-shop.yaml").exists()
    (tmp_path / "cronie").mkdir()
    r = _jobgen("import-crontab", "--host", "--root", str(image), "-o", str(tmp_path / "cronie"), "--cron", "cronie")
    assert f"{image}/etc/cron.d/shop:2: translated: shop-backup-l2 in cron.d-shop.yaml" in r.stdout.splitlines()


def test_each_job_keeps_the_process_context_cron_gave_it(image, tmp_path):
    """cron runs a job as its user, with SHELL (/bin/sh unless the crontab sets it), HOME,
    LOGNAME and USER set, in HOME (do_command.c: chdir(HOME)). A unit gets HOME, LOGNAME and
    USER only with User= (root's too) and runs in '/': root's jobs had no HOME, and a job
    writing `dump.sql` or reading `~/.my.cnf` did it somewhere else."""
    img = str(image)
    _put(image, "etc/passwd", f"root:x:0:0::/root:/bin/bash\nwww-data:x:33:33::/var/www:/usr/sbin/nologin\n"
                              f"shop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
    for home in ("root", "home/shop", "srv/app"):
        (image / home).mkdir(parents=True)
    _put(image, "etc/cron.d/app", "0 1 * * * root mysqldump --all-databases > dump.sql\n"
                                  "0 2 * * * www-data ./warm-cache\n"  # /var/www is not there: cron stays in '/'
                                  "HOME=/srv/app\n0 3 * * * www-data ./rotate\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout
    app = _manifest_jobs(tmp_path / "out", "cron.d-app.yaml")
    context = {name: (job["user"], job.get("working_directory"), job["environment"].get("SHELL"), job["environment"].get("HOME"))
               for name, job in app.items()}
    assert context == {
        "app-mysqldump-l1": ("root", "/root", "/bin/sh", None),
        "app-warm-cache-l2": ("www-data", None, "/bin/sh", None),
        "app-rotate-l4": ("www-data", "/srv/app", "/bin/sh", "/srv/app"),
    }
    shop = _manifest_jobs(tmp_path / "out", "user-shop.yaml")["shop-sync-stock-l2"]
    assert (shop["user"], shop["working_directory"]) == ("shop", "/home/shop")
    # Debian's /etc/crontab runs the folders after `cd /`: the scripts run in '/'.
    daily = _manifest_jobs(tmp_path / "out", "cron.daily.yaml")
    assert {job["user"] for job in daily.values()} == {"root"} and not any("working_directory" in j for j in daily.values())

def test_a_user_crontab_of_root_s_is_read_as_cron_reads_it(image, tmp_path):
    """Debian's cron and cronie read a user crontab that is its user's or root's
    (database.c: `st_uid != ROOT_UID && st_uid != pw->pw_uid` is WRONG FILE OWNER): root's was
    refused. In an image, root is also whoever owns the image's root."""
    img = str(image)
    _put(image, "etc/passwd", f"root:x:0:0::/root:/bin/sh\nshop:x:{os.getuid() + 1}:100::/home/shop:/bin/sh\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout
    assert f"{img}/var/spool/cron/crontabs/shop:2: translated: shop-sync-stock-l2 in user-shop.yaml" in r.stdout.splitlines()
    assert _manifest_jobs(tmp_path / "out", "user-shop.yaml")["shop-sync-stock-l2"]["user"] == "shop"


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



def test_cron_tz_is_the_zone_of_cronie_s_jobs_and_only_an_environment_variable_for_debian_s(image, tmp_path):
    # Debian's cron runs every job in the host's zone (cron(8)): the line runs at 02:30
    # Berlin time, as before the import; CRON_TZ is one more variable of its environment.
    _put(image, "var/spool/cron/crontabs/shop", "CRON_TZ=America/New_York\n30 2 * * * /usr/local/bin/nightly\n", 0o600)
    img = str(image)
    (tmp_path / "debian").mkdir()
    (tmp_path / "cronie").mkdir()
    berlin = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "debian"), "--zone", "Europe/Berlin")
    lines = berlin.stdout.splitlines()
    assert (f"{img}/var/spool/cron/crontabs/shop:2: needs review: shop-nightly-l2: DST change on 2028-03-26 (02:00 -> "
            "03:00 Europe/Berlin): cron makes up a run the change skipped; cron runs 1 more time (03:00 CEST)") in lines
    assert any(line.startswith(f"{img}/var/spool/cron/crontabs/shop:1: ") and "CRON_TZ=America/New_York: Debian's cron runs "
               "every job in the host's time zone (cron(8))" in line for line in lines), lines
    job = _manifest_jobs(tmp_path / "debian", "user-shop.yaml")["shop-nightly-l2"]
    assert ("timezone" in job, job["environment"]["CRON_TZ"]) == (False, "America/New_York")
    # cronie runs the lines after CRON_TZ in that zone (--cron: whose rules, where the image's
    # files would tell Debian's): its DST changes are the ones reported.
    _put(image, "var/spool/cron/shop", "CRON_TZ=America/New_York\n30 2 * * * /usr/local/bin/nightly\n", 0o600)
    ny = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "cronie"), "--zone", "Europe/Berlin",
                 "--cron", "cronie")
    assert (f"{img}/var/spool/cron/shop:2: needs review: shop-nightly-l2: DST change on 2028-03-12 (02:00 -> "
            "03:00 America/New_York): cron makes up a run the change skipped; cron runs 1 more time (03:00 EDT)") in ny.stdout.splitlines()
    job = _manifest_jobs(tmp_path / "cronie", "user-shop.yaml")["shop-nightly-l2"]
    assert (job["timezone"], "CRON_TZ" in job.get("environment", {})) == ("America/New_York", False)


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


# ----------------------------------------------------------------------------- run-parts runners

# RHEL 9 / Fedora's cronie, as shipped: /etc/crontab runs nothing, /etc/cron.d/0hourly
# (cronie) runs the hourly folder, and with cronie-anacron /etc/cron.hourly/0anacron starts
# anacron, which runs the daily, weekly and monthly folders from /etc/anacrontab.
RHEL_CRONTAB = """\
SHELL=/bin/bash
PATH=/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=root

# For details see man 4 crontabs

# Example of job definition:
# .---------------- minute (0 - 59)
# |  .------------- hour (0 - 23)
# |  |  .---------- day of month (1 - 31)
# |  |  |  .------- month (1 - 12) OR jan,feb,mar,apr ...
# |  |  |  |  .---- day of week (0 - 6) (Sunday=0 or 7) OR sun,mon,tue,wed,thu,fri,sat
# |  |  |  |  |
# *  *  *  *  * user-name  command to be executed

"""
RHEL_0HOURLY = """\
# Run the hourly jobs
SHELL=/bin/bash
PATH=/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=root
01 * * * * root run-parts /etc/cron.hourly
"""
RHEL_ANACRONTAB = """\
# /etc/anacrontab: configuration file for anacron

# See anacron(8) and anacrontab(5) for details.

SHELL=/bin/sh
PATH=/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=root
# the maximal random delay added to the base delay of the jobs
RANDOM_DELAY=45
# the jobs will be started during the following hours only
START_HOURS_RANGE=3-22

#period in days   delay in minutes   job-identifier   command
1\t5\tcron.daily\t\tnice run-parts /etc/cron.daily
7\t25\tcron.weekly\t\tnice run-parts /etc/cron.weekly
@monthly 45\tcron.monthly\t\tnice run-parts /etc/cron.monthly
"""


# The head of RHEL's and Fedora's /usr/bin/run-parts (crontabs package): a bash script.
RHEL_RUN_PARTS = "#!/bin/bash\n# run-parts - concept taken from Debian\n"


@pytest.fixture
def rhel(tmp_path) -> Path:
    """A RHEL/Fedora host with cronie and cronie-anacron: a script in each run-parts folder."""
    root = tmp_path / "rhel"
    _put(root, "etc/crontab", RHEL_CRONTAB)
    _put(root, "etc/cron.d/0hourly", RHEL_0HOURLY)
    _put(root, "etc/anacrontab", RHEL_ANACRONTAB)
    _put(root, "usr/sbin/anacron", "#!/bin/sh\n", 0o755)
    _put(root, "etc/cron.hourly/0anacron", "#!/bin/sh\n/usr/sbin/anacron -s\n", 0o755)
    _put(root, "etc/cron.hourly/sa1", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "etc/cron.daily/logrotate", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "etc/cron.weekly/fstrim", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "etc/cron.monthly/report", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "usr/bin/run-parts", RHEL_RUN_PARTS, 0o755)
    _put(root, "etc/passwd", "root:x:0:0::/root:/bin/bash\n")
    _put(root, "etc/timezone", "Etc/UTC\n")
    (tmp_path / "out").mkdir()
    return root


def _manifest_jobs(out: Path, name: str) -> dict:
    return yaml.safe_load((out / name).read_text())["jobs"]


def test_a_debian_host_with_a_cron_d_line_that_runs_a_folder_too(image, tmp_path):
    """A cron.d line that runs a folder is one more runner: never a job itself. Its times join
    the folder's jobs where cron's runs are the same; where not, they are reported."""
    img, out = str(image), tmp_path / "out"
    _put(image, "etc/cron.d/local-run-parts", "PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin\n"
                                              "47 * * * * root cd / && run-parts --report /etc/cron.hourly\n"
                                              "25 6 * * * root run-parts /etc/cron.daily\n")
    _put(image, "etc/cron.hourly/sync-mirror", "#!/bin/sh\nexit 0\n", 0o755)
    _put(image, "etc/timezone", "Europe/Berlin\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line for line in lines if ": mapped: " in line or "local-run-parts" in line or "cron.hourly" in line] == [
        f"{img}/etc/crontab:19: mapped: runs /etc/cron.hourly with run-parts: the folder's scripts are imported once, "
        f"from the folder, at this line's time, and at the time of {img}/etc/cron.d/local-run-parts:2 (cron ran it at each)",
        f"{img}/etc/crontab:20: mapped: runs /etc/cron.daily with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        f"{img}/etc/crontab:21: mapped: runs /etc/cron.weekly with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        f"{img}/etc/crontab:22: mapped: runs /etc/cron.monthly with run-parts: the folder's scripts are imported once, "
        "from the folder, at this line's time",
        f"{img}/etc/cron.d/local-run-parts:2: mapped: runs /etc/cron.hourly with run-parts: the folder's scripts are "
        f"imported once, from the folder, at this line's time, and at the time of {img}/etc/crontab:19 (cron ran it at each)",
        f"{img}/etc/cron.d/local-run-parts:3: mapped: runs /etc/cron.daily with run-parts: the folder's scripts are "
        f"imported once, from the folder, at the time of {img}/etc/crontab:20",
        # the same minute as /etc/crontab:20: cron ran the folder twice at 06:25, a timer elapses once
        f"{img}/etc/cron.d/local-run-parts:3: needs review: runs /etc/cron.daily too, but it runs the folder at minutes "
        f"{img}/etc/crontab:20 runs it at too (first 2028-01-01 06:25): cron ran it twice then, a timer elapses once; "
        "this line's runs ('25 6 * * *') are dropped: add them by hand if they matter",
        f"{img}/etc/cron.hourly/sync-mirror: translated: cron-hourly-sync-mirror in cron.hourly.yaml",
        # each runner's DST differences, at its own minute
        f"{img}/etc/cron.hourly/sync-mirror: needs review: cron-hourly-sync-mirror: DST change on 2028-10-29 (03:00 -> "
        "02:00 Europe/Berlin): cron runs the repeated minutes again; cron runs 1 more time (02:17 CET)",
        f"{img}/etc/cron.hourly/sync-mirror: needs review: cron-hourly-sync-mirror: DST change on 2028-10-29 (03:00 -> "
        "02:00 Europe/Berlin): cron runs the repeated minutes again; cron runs 1 more time (02:47 CET)",
        f"{img}/etc/cron.hourly: needs review: 1 job in cron.hourly.yaml: {REVIEW}",
    ]
    assert "cron.d-local-run-parts.yaml" not in [p.name for p in out.iterdir()]  # no line of it is a job
    hourly = _manifest_jobs(out, "cron.hourly.yaml")["cron-hourly-sync-mirror"]
    assert (hourly["schedule"], hourly["description"]) == (
        ["*-*-* *:17:00", "*-*-* *:47:00"],
        "cron: /etc/cron.hourly/sync-mirror, run by run-parts from /etc/crontab line 19 and /etc/cron.d/local-run-parts line 2")
    assert _manifest_jobs(out, "cron.daily.yaml")["cron-daily-dpkg"]["schedule"] == "*-*-* 06:25:00"
    check = _jobgen("check", *(str(p) for p in sorted(out.iterdir())))
    assert check.returncode == 0, check.stderr


DEBIAN_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin\n"  # as Debian's /etc/crontab


@pytest.mark.parametrize(("extra", "schedule", "why"), [
    # 05:00 is no minute of /etc/crontab's '17 * * * *': the union is cron's runs
    (DEBIAN_PATH + "0 5 * * * root run-parts /etc/cron.hourly", ["*-*-* *:17:00", "*-*-* 05:00:00"], None),
    (DEBIAN_PATH + "17 5 * * * root run-parts /etc/cron.hourly", "*-*-* *:17:00",
     "it runs the folder at minutes {img}/etc/crontab:19 runs it at too (first 2028-01-01 05:17): cron ran it twice "
     "then, a timer elapses once; this line's runs ('17 5 * * *') are dropped"),
    (DEBIAN_PATH + "30 * * * * www-data run-parts /etc/cron.hourly", "*-*-* *:17:00",
     "it runs the folder as www-data, {img}/etc/crontab:19 as root; this line's runs ('30 * * * *') are dropped"),
    (DEBIAN_PATH + "@reboot root run-parts /etc/cron.hourly", "*-*-* *:17:00",
     "it runs the folder at boot, not at a calendar's times; this line's runs ('@reboot') are dropped"),
    ("30 * * * * root run-parts /etc/cron.hourly", "*-*-* *:17:00",
     "it runs the folder with another environment than {img}/etc/crontab:19; this line's runs ('30 * * * *') are dropped"),
    # Debian's cron: CRON_TZ is a variable of the environment, not the zone the line runs in.
    (DEBIAN_PATH + "CRON_TZ=Asia/Tokyo\n30 * * * * root run-parts /etc/cron.hourly", "*-*-* *:17:00",
     "it runs the folder with another environment than {img}/etc/crontab:19; this line's runs ('30 * * * *') are dropped"),
])  # fmt: skip
def test_a_second_runner_joins_only_when_cron_s_runs_are_the_same(image, tmp_path, extra, schedule, why):
    img = str(image)
    _put(image, "etc/cron.d/extra", extra + "\n")
    _put(image, "etc/cron.hourly/sync-mirror", "#!/bin/sh\nexit 0\n", 0o755)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    n = extra.count("\n") + 1  # the runner is the file's last line
    assert _manifest_jobs(tmp_path / "out", "cron.hourly.yaml")["cron-hourly-sync-mirror"]["schedule"] == schedule
    reviewed = [x for x in r.stdout.splitlines() if x.startswith(f"{img}/etc/cron.d/extra:{n}: needs review: ")]
    assert reviewed == ([] if why is None else [
        f"{img}/etc/cron.d/extra:{n}: needs review: runs /etc/cron.hourly too, but {why.format(img=img)}: add them by "
        "hand if they matter"])


MAILTO_NOTE = ("MAILTO=root: the jobs after it get mail_on_failure: cron mails any output a job prints, jobgen mails when "
               "a run fails (its status and last journal lines, through the host's sendmail); output goes to the journal")


def test_a_rhel_host_with_anacron_imports_each_folder_from_its_runner(rhel, tmp_path):
    """cronie: /etc/cron.d/0hourly runs the hourly folder; anacron, started by 0anacron in it,
    runs the others from /etc/anacrontab, at a calendar of each line's period."""
    img, out = str(rhel), tmp_path / "out"
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"{img}/etc/crontab:3: note: {MAILTO_NOTE}",
        f"{img}/etc/cron.d/0hourly:4: note: {MAILTO_NOTE}",
        f"{img}/etc/cron.d/0hourly:5: mapped: runs /etc/cron.hourly with run-parts: the folder's scripts are imported "
        "once, from the folder, at this line's time",
        f"{img}/etc/cron.hourly/0anacron: mapped: starts anacron, which runs /etc/anacrontab: the folders it runs are "
        "imported from there, so it is not imported as a job (they would run twice)",
        f"{img}/etc/cron.hourly/sa1: translated: cron-hourly-sa1 in cron.hourly.yaml",
        f"{img}/etc/cron.hourly: needs review: 1 job in cron.hourly.yaml: {REVIEW}",
        f"{img}/etc/cron.daily/logrotate: translated: cron-daily-logrotate in cron.daily.yaml",
        f"{img}/etc/cron.daily: needs review: 1 job in cron.daily.yaml: {REVIEW}",
        f"{img}/etc/cron.weekly/fstrim: translated: cron-weekly-fstrim in cron.weekly.yaml",
        f"{img}/etc/cron.weekly: needs review: 1 job in cron.weekly.yaml: {REVIEW}",
        f"{img}/etc/cron.monthly/report: translated: cron-monthly-report in cron.monthly.yaml",
        f"{img}/etc/cron.monthly: needs review: 1 job in cron.monthly.yaml: {REVIEW}",
        f"{img}/etc/anacrontab:14: mapped: runs /etc/cron.daily with run-parts every day: the folder's scripts are "
        "imported once, from the folder, at 03:05 every day (the first hour anacron starts jobs at, then the line's "
        "delay of 5 minutes) with persistent: true and randomized_delay: 45min (RANDOM_DELAY=45, anacron's random delay)",
        f"{img}/etc/anacrontab:14: needs review: anacron ran this line when it was started (hourly) and a day had passed "
        "since the date of the last run, only between 03:00 and 22:00 (START_HOURS_RANGE=3-22); the jobs' timer "
        "elapses at 03:05 every day ('*-*-* 03:05:00') instead, and makes up a missed run at boot at any hour",
        f"{img}/etc/anacrontab:15: mapped: runs /etc/cron.weekly with run-parts every week: the folder's scripts are "
        "imported once, from the folder, at 03:25 every week (the first hour anacron starts jobs at, then the line's "
        "delay of 25 minutes) with persistent: true and randomized_delay: 45min (RANDOM_DELAY=45, anacron's random delay)",
        f"{img}/etc/anacrontab:15: needs review: anacron ran this line when it was started (hourly) and a week had "
        "passed since the date of the last run, only between 03:00 and 22:00 (START_HOURS_RANGE=3-22); the jobs' timer "
        "elapses at 03:25 every week ('Mon *-*-* 03:25:00') instead, and makes up a missed run at boot at any hour",
        f"{img}/etc/anacrontab:16: mapped: runs /etc/cron.monthly with run-parts every month: the folder's scripts are "
        "imported once, from the folder, at 03:45 every month (the first hour anacron starts jobs at, then the line's "
        "delay of 45 minutes) with persistent: true and randomized_delay: 45min (RANDOM_DELAY=45, anacron's random delay)",
        f"{img}/etc/anacrontab:16: needs review: anacron ran this line when it was started (hourly) and a month had "
        "passed since the date of the last run, only between 03:00 and 22:00 (START_HOURS_RANGE=3-22); the jobs' timer "
        "elapses at 03:45 every month ('*-*-01 03:45:00') instead, and makes up a missed run at boot at any hour",
    ]
    assert r.stderr == f"jobgen: 4 jobs imported into 4 manifests in {out}\n"
    path = {"PATH": "/sbin:/bin:/usr/sbin:/usr/bin"}
    assert _manifest_jobs(out, "cron.hourly.yaml") == {"cron-hourly-sa1": {
        "description": "cron: /etc/cron.hourly/sa1, run by run-parts from /etc/cron.d/0hourly line 5",
        "command": ["/etc/cron.hourly/sa1"], "schedule": "*-*-* *:01:00", "user": "root", "mail_on_failure": "root",
        "hardening": "none", "environment": {**path, "SHELL": "/bin/bash"}}}  # 0hourly's SHELL, as cron sets it
    for manifest, name, schedule in (("cron.daily.yaml", "cron-daily-logrotate", "*-*-* 03:05:00"),
                                     ("cron.weekly.yaml", "cron-weekly-fstrim", "Mon *-*-* 03:25:00"),
                                     ("cron.monthly.yaml", "cron-monthly-report", "*-*-01 03:45:00")):
        job = _manifest_jobs(out, manifest)[name]
        assert (job["schedule"], job["persistent"], job["randomized_delay"], job["environment"], job["mail_on_failure"],
                job["user"]) == (schedule, True, "45min", path, "root", "root"), manifest
    check = _jobgen("check", *(str(p) for p in sorted(out.iterdir())))
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize(("period", "schedule"), [
    ("1", "*-*-* 03:05:00"), ("@daily", "*-*-* 03:05:00"), ("7", "Mon *-*-* 03:05:00"), ("@weekly", "Mon *-*-* 03:05:00"),
    ("@monthly", "*-*-01 03:05:00"), ("@yearly", "*-01-01 03:05:00"),
])  # fmt: skip
def test_each_anacron_period_a_calendar_holds(rhel, tmp_path, period, schedule):
    _put(rhel, "etc/anacrontab", RHEL_ANACRONTAB.replace("1\t5\tcron.daily", f"{period}\t5\tcron.daily"))
    r = _jobgen("import-crontab", "--host", "--root", str(rhel), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert _manifest_jobs(tmp_path / "out", "cron.daily.yaml")["cron-daily-logrotate"]["schedule"] == schedule


def test_an_anacron_period_no_calendar_holds_is_refused_with_its_folder(rhel, tmp_path):
    img = str(rhel)
    _put(rhel, "etc/anacrontab", RHEL_ANACRONTAB.replace("7\t25\tcron.weekly", "3\t25\tcron.weekly")
         + "7 10 backup /usr/local/bin/backup\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 1
    refused = [line for line in r.stdout.splitlines() if ": refused: " in line]
    assert refused == [
        f"{img}/etc/cron.weekly: refused: only {img}/etc/anacrontab:15 runs this folder, and it is not imported (see "
        "that line): nothing imported",
        f"{img}/etc/anacrontab:15: refused: anacron runs a job once every N days counted from its last run, which is no "
        "calendar: translate it by hand (a schedule with persistent: true)",
        f"{img}/etc/anacrontab:17: refused: anacron runs a job once every N days counted from its last run, which is no "
        "calendar: translate it by hand (a schedule with persistent: true)",
    ]
    assert r.stderr == f"jobgen: 3 jobs imported into 3 manifests in {tmp_path / 'out'}; 3 refused\n"
    assert not (tmp_path / "out" / "cron.weekly.yaml").exists()


def test_without_anacron_nothing_runs_anacrontab_and_a_folder_no_line_runs_is_refused(rhel, tmp_path):
    """cronie without cronie-anacron (no /usr/sbin/anacron, no 0anacron), /etc/anacrontab
    left behind: cron never ran the daily, weekly and monthly scripts, so none is imported."""
    img = str(rhel)
    (rhel / "usr/sbin/anacron").unlink()
    (rhel / "etc/cron.hourly/0anacron").unlink()
    _put(rhel, "etc/anacrontab", RHEL_ANACRONTAB + "3 10 backup /usr/local/bin/backup\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 1
    never = ("refused: no line of /etc/crontab, /etc/cron.d or a user crontab runs this folder, so the host never ran its "
             "scripts: nothing imported (an import does not start scripts the host did not run); ")
    not_run = ("but anacron is not installed (no /usr/sbin/anacron), so nothing runs this line: the folder is not "
               "imported from it")
    assert [line for line in r.stdout.splitlines() if ": note: " not in line] == [
        f"{img}/etc/cron.d/0hourly:5: mapped: runs /etc/cron.hourly with run-parts: the folder's scripts are imported "
        "once, from the folder, at this line's time",
        f"{img}/etc/cron.hourly/sa1: translated: cron-hourly-sa1 in cron.hourly.yaml",
        f"{img}/etc/cron.hourly: needs review: 1 job in cron.hourly.yaml: {REVIEW}",
        f"{img}/etc/cron.daily: {never}{img}/etc/anacrontab:14 would, but anacron is not installed",
        f"{img}/etc/cron.weekly: {never}{img}/etc/anacrontab:15 would, but anacron is not installed",
        f"{img}/etc/cron.monthly: {never}{img}/etc/anacrontab:16 would, but anacron is not installed",
        f"{img}/etc/anacrontab:14: mapped: runs /etc/cron.daily with run-parts, {not_run}",
        f"{img}/etc/anacrontab:15: mapped: runs /etc/cron.weekly with run-parts, {not_run}",
        f"{img}/etc/anacrontab:16: mapped: runs /etc/cron.monthly with run-parts, {not_run}",
        f"{img}/etc/anacrontab:17: refused: anacron is not installed (no /usr/sbin/anacron), so nothing runs this line: "
        "not imported (if it should run, translate it by hand: anacron counts N days from the last run, which no "
        "calendar is)",
    ]
    # each folder with scripts is one refusal, as the line that runs nothing
    assert r.stderr == f"jobgen: 1 job imported into 1 manifest in {tmp_path / 'out'}; 4 refused\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cron.hourly.yaml"]


def test_a_folder_no_line_runs_is_refused_and_counted(image, tmp_path):
    img = str(image)
    _put(image, "etc/crontab", "\n".join(line for line in DEBIAN_CRONTAB.splitlines() if "cron.weekly" not in line) + "\n")
    _put(image, "etc/cron.weekly/man-db", "#!/bin/sh\nexit 0\n", 0o755)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 1
    assert [line for line in r.stdout.splitlines() if "cron.weekly" in line] == [
        f"{img}/etc/cron.weekly: refused: no line of /etc/crontab, /etc/cron.d or a user crontab runs this folder, so "
        "the host never ran its scripts: nothing imported (an import does not start scripts the host did not run)"]
    assert r.stderr == f"jobgen: 5 jobs imported into 3 manifests in {tmp_path / 'out'}; 1 refused\n"


# cronie-noanacron's /etc/cron.d/dailyjobs, as shipped: cron runs the folders itself when
# cronie-anacron (and its 0anacron) is not installed.
RHEL_DAILYJOBS = """\
# Run the daily, weekly, and monthly jobs if cronie-anacron is not installed
SHELL=/bin/bash
PATH=/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=root

# run-parts
02 4 * * * root [ ! -f /etc/cron.hourly/0anacron ] && run-parts /etc/cron.daily
22 4 * * 0 root [ ! -f /etc/cron.hourly/0anacron ] && run-parts /etc/cron.weekly
42 4 1 * * root [ ! -f /etc/cron.hourly/0anacron ] && run-parts /etc/cron.monthly
"""


def test_a_rhel_host_with_cronie_noanacron_runs_the_folders_from_cron_d(rhel, tmp_path):
    img, out = str(rhel), tmp_path / "out"
    for rel in ("usr/sbin/anacron", "etc/cron.hourly/0anacron", "etc/anacrontab"):
        (rhel / rel).unlink()
    _put(rhel, "etc/cron.d/dailyjobs", RHEL_DAILYJOBS)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if "dailyjobs" in line and ": note: " not in line] == [
        f"{img}/etc/cron.d/dailyjobs:{n}: mapped: runs /etc/cron.{period} with run-parts: the folder's scripts are "
        "imported once, from the folder, at this line's time" for n, period in ((7, "daily"), (8, "weekly"), (9, "monthly"))]
    assert sorted(p.name for p in out.iterdir()) == ["cron.daily.yaml", "cron.hourly.yaml", "cron.monthly.yaml", "cron.weekly.yaml"]
    assert [(_manifest_jobs(out, m)[name]["schedule"], "persistent" in _manifest_jobs(out, m)[name]) for m, name in (
        ("cron.daily.yaml", "cron-daily-logrotate"), ("cron.weekly.yaml", "cron-weekly-fstrim"),
        ("cron.monthly.yaml", "cron-monthly-report"))] == [
        ("*-*-* 04:02:00", False), ("Sun *-*-* 04:22:00", False), ("*-*-01 04:42:00", False)]


@pytest.mark.parametrize(("old", "new", "message"), [
    ("START_HOURS_RANGE=3-22", "START_HOURS_RANGE=22-3",
     "START_HOURS_RANGE=22-3 (line 11) is not a range of hours (e.g. 3-22): when anacron ran the line is unknown"),
    ("RANDOM_DELAY=45", "RANDOM_DELAY=soon", "RANDOM_DELAY=soon (line 9) is not a number of minutes"),
    ("1\t5\tcron.daily", "1\tfive\tcron.daily",
     "the delay 'five' is not a number of minutes (anacrontab(5)): when anacron ran the line is unknown"),
    ("1\t5\tcron.daily", "1\t1300\tcron.daily", "a delay of 1300 minutes after 03:00 is the next day: no daily time"),
])  # fmt: skip
def test_an_anacrontab_line_jobgen_cannot_time_is_refused_with_its_folder(rhel, tmp_path, old, new, message):
    img = str(rhel)
    _put(rhel, "etc/anacrontab", RHEL_ANACRONTAB.replace(old, new))
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 1
    refused = [line for line in r.stdout.splitlines() if ": refused: " in line and "cron.daily" in line or "anacrontab:14" in line]
    assert refused == [
        f"{img}/etc/cron.daily: refused: only {img}/etc/anacrontab:14 runs this folder, and it is not imported (see that "
        "line): nothing imported",
        f"{img}/etc/anacrontab:14: refused: {message}",
    ]
    assert not (tmp_path / "out" / "cron.daily.yaml").exists()


# ----------------------------------------------------------------------------- cron flavours

CRONIE_CRON_D_SKIP = ("cron skips it: cronie does not read a name starting with '.' or '#', or ending in '~', "
                      "'.rpmsave', '.rpmorig' or '.rpmnew' (cronie's database.c, not_a_crontab)")
RHEL_RUN_PARTS_SKIP = ("run-parts skips it: RHEL's run-parts does not run a name starting with '.', or ending in "
                       "'~', ',', ',v', '.cfsaved', '.rpmsave', '.rpmorig', '.rpmnew' or '.swp' (/usr/bin/run-parts)")
RAID_CHECK = "# Run system wide raid-check once a week on Sunday at 1am by default\n0 1 * * Sun root /usr/sbin/raid-check\n"


def _cronie_names(root: Path) -> None:
    for name in ("man-db.cron", "logrotate", "x.rpmnew", "y~", ".hidden"):
        _put(root, f"etc/cron.daily/{name}", "#!/bin/sh\nexit 0\n", 0o755)
    _put(root, "etc/cron.d/raid-check", RAID_CHECK)
    _put(root, "etc/cron.d/z.rpmsave", RAID_CHECK)


def test_a_rhel_image_reads_the_names_cronie_and_its_run_parts_read(rhel, tmp_path):
    """RHEL's run-parts runs `man-db.cron` (a dot is no reason to skip) and cronie reads
    /etc/cron.d/raid-check; each skips only the names its own rule lists."""
    img = str(rhel)
    _cronie_names(rhel)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line for line in lines if ": ignored: " in line] == [
        f"{img}/etc/cron.d/z.rpmsave: ignored: {CRONIE_CRON_D_SKIP}",
        f"{img}/etc/cron.daily/.hidden: ignored: {RHEL_RUN_PARTS_SKIP}",
        f"{img}/etc/cron.daily/x.rpmnew: ignored: {RHEL_RUN_PARTS_SKIP}",
        f"{img}/etc/cron.daily/y~: ignored: {RHEL_RUN_PARTS_SKIP}",
    ]
    assert [line for line in lines if ": translated: " in line and ("cron.daily" in line or "raid-check" in line)] == [
        f"{img}/etc/cron.d/raid-check:2: translated: raid-check-raid-check-l2 in cron.d-raid-check.yaml",
        f"{img}/etc/cron.daily/logrotate: translated: cron-daily-logrotate in cron.daily.yaml",
        f"{img}/etc/cron.daily/man-db.cron: translated: cron-daily-man-db-cron in cron.daily.yaml",
    ]
    assert sorted(_manifest_jobs(tmp_path / "out", "cron.daily.yaml")) == ["cron-daily-logrotate", "cron-daily-man-db-cron"]
    # cronie-anacron is started by cron's 0anacron and stops with cron: nothing to disable
    assert "anacron.timer" not in r.stdout


@pytest.mark.parametrize("os_release", [
    'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n',
    "NAME=Fedora\nID=fedora\n",
])  # fmt: skip
def test_without_run_parts_the_image_s_os_release_tells_its_cron(rhel, tmp_path, os_release):
    (rhel / "usr/bin/run-parts").unlink()
    _put(rhel, "etc/os-release", os_release)
    _put(rhel, "etc/cron.daily/man-db.cron", "#!/bin/sh\nexit 0\n", 0o755)
    r = _jobgen("import-crontab", "--host", "--root", str(rhel), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert f"{rhel}/etc/cron.daily/man-db.cron: translated: cron-daily-man-db-cron in cron.daily.yaml" in r.stdout.splitlines()


def test_a_debian_image_keeps_debian_s_rule(image, tmp_path):
    """Debian's run-parts (an ELF binary from debianutils) does not run `man-db.cron`, and
    Debian's cron does not read `/etc/cron.d/raid-check.rpmsave`'s kin: its own rule, its reason."""
    img = str(image)
    _put(image, "usr/bin/run-parts", b"\x7fELF\x02\x01\x01\x00", 0o755)
    _put(image, "etc/os-release", 'ID=fedora\n')  # the program that runs the folders wins
    _put(image, "etc/cron.daily/man-db.cron", "#!/bin/sh\nexit 0\n", 0o755)
    _put(image, "etc/cron.d/raid.check", RAID_CHECK)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"{img}/etc/cron.daily/man-db.cron: ignored: {SKIP}" in lines
    assert f"{img}/etc/cron.d/raid.check: ignored: {SKIP}" in lines
    assert "cron-daily-man-db-cron" not in _manifest_jobs(tmp_path / "out", "cron.daily.yaml")




@pytest.mark.parametrize("command, period", [
    ("cd / && run-parts --report /etc/cron.hourly", "hourly"),  # Debian's /etc/crontab
    ("test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }", "daily"),  # Debian 12, 13
    ("test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.weekly )", "weekly"),  # Debian 11, Ubuntu
    ("run-parts /etc/cron.hourly", "hourly"),  # RHEL's and Fedora's /etc/cron.d/0hourly
    ("[ ! -f /etc/cron.hourly/0anacron ] && run-parts /etc/cron.daily", "daily"),  # cronie-noanacron's dailyjobs
    ("nice run-parts /etc/cron.monthly", "monthly"),  # RHEL's anacrontab
    ("run-parts --report /etc/cron.daily", "daily"),  # Debian's anacrontab
    ("run-parts --list /etc/cron.daily", None),
    ("[ -e /etc/maintenance ] || run-parts --report /etc/cron.daily", None),
    ("run-parts --report /etc/cron.daily > /var/log/daily.log", None),
])  # fmt: skip
def test_the_shapes_distributions_ship_are_runners_and_no_other(command, period):
    from jobgen.tools import crontab_host

    assert crontab_host.runner_folder(("/bin/sh", "-c", command)) == period

# A line is the folder's runner (its scripts become jobs at its time) only when running the
# folder is all it does: a guard in front, a pipe after, or run-parts' --list made the
# folder's scripts jobs that ran unguarded, or at all, where cron ran them guarded or never.
@pytest.mark.parametrize("line, command, runs", [
    ("25 6 * * * root [ -e /etc/maintenance-mode ] || run-parts --report /etc/cron.daily",
     "[ -e /etc/maintenance-mode ] || run-parts --report /etc/cron.daily", True),
    ("25 6 * * * root run-parts --regex '^[a-z]+$' /etc/cron.daily", "run-parts --regex '^[a-z]+$' /etc/cron.daily", True),
    # --list prints the names and runs none: no line ran the folder's scripts.
    ("25 6 * * * root run-parts --list /etc/cron.daily | mail -s scripts ops@example.com",
     "run-parts --list /etc/cron.daily | mail -s scripts ops@example.com", False),
], ids=["guard", "--regex", "--list and a pipe"])
def test_a_line_that_does_more_than_run_a_folder_is_its_own_job(image, tmp_path, line, command, runs):
    img, out = str(image), tmp_path / "out"
    _put(image, "etc/crontab", "SHELL=/bin/sh\n" + line + "\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(out))
    assert r.returncode == (0 if runs else 1), r.stdout
    lines = r.stdout.splitlines()
    assert f"{img}/etc/crontab:2: translated: crontab-cron-daily-l2 in crontab.yaml" in lines
    if runs:
        for script in ("apt-compat", "dpkg"):
            assert (f"{img}/etc/cron.daily/{script}: mapped: run by run-parts inside the command of {img}/etc/crontab:2, "
                    "which is imported as it is (its job runs the folder as cron did); not a job of its own") in lines
    else:
        assert (f"{img}/etc/cron.daily: refused: no line of /etc/crontab, /etc/cron.d or a user crontab runs this folder, "
                "so the host never ran its scripts: nothing imported (an import does not start scripts the host did not "
                "run)") in lines
    assert not (out / "cron.daily.yaml").exists()
    job = _manifest_jobs(out, "crontab.yaml")["crontab-cron-daily-l2"]
    assert (job["command"], job["schedule"]) == (["/bin/sh", "-c", command], "*-*-* 06:25:00")


# systemd-cron reads the same files by rules of its own (host/crontabs.SYSTEMD_CRON_LINES):
# read by Debian's, the import was wrong without a word (a line naming both day fields ran
# on either day, where systemd-cron runs it when both match). Told by its generator, Debian
# 13's (C++, ELF) or Debian 12's (Python), under /usr/lib or, through merged /usr, /lib.
SYSTEMD_CRON_2 = ("jobgen: error: the image's cron is systemd-cron 2.x ({img}/{where}), which reads crontabs by rules "
                  "of its own: a line with both a day of the month and a day of the week runs only when both match, "
                  "a month name drops the line, and each script in /etc/cron.daily and the other folders gets a timer "
                  "of its own; jobgen reads them by Debian's cron's or cronie's rules only: pass --cron debian or "
                  "--cron cronie to read them by those, then review each job (README: systemd-cron); nothing written")
SYSTEMD_CRON_1 = ("jobgen: error: the image's cron is systemd-cron 1.x ({img}/{where}), which reads crontabs by rules "
                  "of its own: its own timers run /etc/cron.daily and the other folders, at times of their own; "
                  "jobgen reads them by Debian's cron's or cronie's rules only: pass --cron debian or --cron cronie to "
                  "read them by those, then review each job (README: systemd-cron); nothing written")
GENERATOR = "systemd/system-generators/systemd-crontab-generator"


@pytest.mark.parametrize("where, head, message", [
    (f"usr/lib/{GENERATOR}", b"\x7fELF\x02\x01\x01\x00", SYSTEMD_CRON_2),
    (f"lib/{GENERATOR}", b"#!/usr/bin/python3\n", SYSTEMD_CRON_1),
], ids=["2.x", "1.x, merged /usr"])
def test_a_systemd_cron_image_is_not_read_by_another_cron_s_rules_unless_asked(image, tmp_path, where, head, message):
    img = str(image)
    if where.startswith("lib/"):
        (image / "usr/lib").mkdir(parents=True)
        (image / "lib").symlink_to("usr/lib")  # merged /usr, as debootstrap makes it
        where = f"usr/{where}"  # the real path inside the image
    _put(image, where, head, 0o755)
    _put(image, "etc/cron.d/both-days", "30 4 1,15 * 5 root /usr/local/bin/report\n")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert (r.returncode, r.stdout, r.stderr.splitlines()) == (2, "", [message.format(img=img, where=where)])
    assert list((tmp_path / "out").iterdir()) == []
    asked = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"), "--cron", "debian")
    assert asked.returncode == 0, asked.stderr
    assert f"{img}/etc/cron.d/both-days:1: translated: both-days-report-l1 in cron.d-both-days.yaml" in asked.stdout.splitlines()


DEBIAN_ANACRONTAB = """\
SHELL=/bin/sh
HOME=/root
LOGNAME=root

1\t5\tcron.daily\trun-parts --report /etc/cron.daily
7\t10\tcron.weekly\trun-parts --report /etc/cron.weekly
@monthly\t15\tcron.monthly\trun-parts --report /etc/cron.monthly
"""
ANACRON_TWICE = ("{img}/etc/anacrontab: needs review: anacron is installed and anacron.timer starts it apart from "
                 "cron; it runs {folders} from this file, whose scripts are now imported jobs: disable it (systemctl "
                 "disable --now anacron.timer) or remove the anacron package once the jobs are applied, or those "
                 "scripts run twice")


def test_debian_s_anacron_must_be_disabled_or_the_folders_run_twice(image, tmp_path):
    """Debian's anacron package starts anacron from anacron.timer, without cron: after the
    import it would run the imported folders a second time."""
    img = str(image)
    _put(image, "usr/sbin/anacron", "#!/bin/sh\n", 0o755)
    _put(image, "etc/anacrontab", DEBIAN_ANACRONTAB)
    _put(image, "etc/cron.weekly/man-db", "#!/bin/sh\nexit 0\n", 0o755)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    # the monthly folder has no script: nothing of it is imported, nothing runs twice
    assert [line for line in r.stdout.splitlines() if "anacron.timer" in line] == [
        ANACRON_TWICE.format(img=img, folders="/etc/cron.daily, /etc/cron.weekly")]
    # without anacron installed, nothing runs /etc/anacrontab: no such line
    (image / "usr/sbin/anacron").unlink()
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"), "--force")
    assert "anacron.timer" not in r.stdout


def test_a_cron_d_name_cronie_reads_is_a_safe_manifest_name(rhel, tmp_path):
    """cronie reads /etc/cron.d names with any byte: in the manifest's file name each byte but
    letters, digits, '.', '_' and '-' is %XX ('%' too), so no two names share one file."""
    img, out = str(rhel), tmp_path / "out"
    for name in ("raid.check", "a b", "a_b", "multi\nline", os.fsdecode(b"bad\xffname"), "100%"):
        (rhel / "etc/cron.d").joinpath(name).write_text(RAID_CHECK)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("cron.d-")) == [
        "cron.d-100%25.yaml", "cron.d-a%20b.yaml", "cron.d-a_b.yaml",
        "cron.d-bad%FFname.yaml", "cron.d-multi%0Aline.yaml", "cron.d-raid.check.yaml"]
    assert f"{img}/etc/cron.d/multi\\nline:2: translated: multi-line-raid-check-l2 in cron.d-multi%0Aline.yaml" in r.stdout.splitlines()
    assert len(r.stdout.splitlines()) == len(r.stdout.split("\n")) - 1  # every report line is one line


def test_a_rhel_image_s_user_crontabs_are_read_from_var_spool_cron(rhel, tmp_path):
    """cronie keeps user crontabs in /var/spool/cron/USER (Debian: /var/spool/cron/crontabs),
    and skips the names of its not_a_crontab()."""
    img = str(rhel)
    _put(rhel, "etc/passwd", f"root:x:0:0::/root:/bin/bash\nshop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
    _put(rhel, "var/spool/cron/shop", "*/10 * * * * /usr/local/bin/sync-stock --quiet\n", 0o600)
    _put(rhel, "var/spool/cron/shop.rpmsave", "* * * * * /bin/true\n", 0o600)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"{img}/var/spool/cron/shop:1: translated: shop-sync-stock-l1 in user-shop.yaml" in lines
    assert f"{img}/var/spool/cron/shop.rpmsave: ignored: {CRONIE_CRON_D_SKIP}" in lines
    assert _manifest_jobs(tmp_path / "out", "user-shop.yaml")["shop-sync-stock-l1"]["user"] == "shop"


def test_a_crontab_others_can_write_or_of_a_foreign_owner_is_refused_as_cron_skips_it(image, tmp_path):
    # cron skips such a file (INSECURE MODE, WRONG FILE OWNER): imported, its lines would run
    # jobs cron never ran, a system crontab's as root.
    img = str(image)
    _put(image, "etc/cron.d/open", "* * * * * root /usr/local/bin/planted\n", 0o666)
    _put(image, "etc/cron.d/group", "* * * * * root /usr/local/bin/planted\n", 0o664)
    os.symlink("open", image / "etc/cron.d/linked")
    _put(image, "var/spool/cron/crontabs/shop", "* * * * * /usr/local/bin/planted\n", 0o622)
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(_put(image, "etc/cron.d/foreign", "* * * * * root /usr/local/bin/planted\n"), 4242, 4242)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    insecure = "cron reads a crontab only its owner can write (cron: INSECURE MODE)"
    assert f"{img}/etc/cron.d/open: refused: cron skips it: others can write it (mode 0666); {insecure}" in lines
    assert f"{img}/etc/cron.d/group: refused: cron skips it: others can write it (mode 0664); {insecure}" in lines
    assert f"{img}/etc/cron.d/linked: refused: cron skips it: others can write it (mode 0666); {insecure}" in lines
    assert f"{img}/var/spool/cron/crontabs/shop: refused: cron skips it: others can write it (mode 0622); {insecure}" in lines
    if os.geteuid() == 0:
        assert (f"{img}/etc/cron.d/foreign: refused: cron skips it: owned by uid 4242; a system crontab must be root's "
                "(cron: WRONG FILE OWNER)") in lines
    assert r.returncode == 1 and "Traceback" not in r.stderr
    written = "".join(p.read_text() for p in (tmp_path / "out").iterdir())
    assert "planted" not in written
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cron.d-e2scrub_all.yaml", "cron.daily.yaml"]



def test_a_crontab_with_a_second_hard_link_is_refused_as_cron_skips_it(image, tmp_path):
    # Debian's cron: "NUMBER OF HARD LINKS > 1"; cronie: "BAD LINK COUNT". A second name
    # elsewhere could change the crontab behind cron's back, so cron runs none of it.
    img = str(image)
    os.link(image / "etc/cron.d/e2scrub_all", image / "e2scrub-copy")
    os.link(image / "var/spool/cron/crontabs/shop", image / "shop-copy")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    for rel in ("etc/cron.d/e2scrub_all", "var/spool/cron/crontabs/shop"):
        assert (f"{img}/{rel}: refused: cron skips it: it has 2 hard links, and cron reads a crontab with one only "
                "(cron: NUMBER OF HARD LINKS > 1; cronie: BAD LINK COUNT)") in lines
    assert r.returncode == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cron.daily.yaml"]  # /etc/crontab runs only the folders


def test_cronie_checks_the_link_count_of_user_crontabs_only(rhel, tmp_path):
    # cronie's check_open(): `if (pw && statbuf.st_nlink != 1)`, BAD LINK COUNT: pw is NULL for
    # a system crontab, so a hard-linked /etc/cron.d file runs.
    _put(rhel, "etc/passwd", f"root:x:0:0::/root:/bin/bash\nshop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
    _put(rhel, "etc/cron.d/linked", "0 3 * * * root /usr/local/bin/report\n")
    _put(rhel, "var/spool/cron/shop", "0 4 * * * /usr/local/bin/sync\n", 0o600)
    os.link(rhel / "etc/cron.d/linked", rhel / "linked-copy")
    os.link(rhel / "var/spool/cron/shop", rhel / "shop-copy")
    r = _jobgen("import-crontab", "--host", "--root", str(rhel), "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    assert f"{rhel}/etc/cron.d/linked:1: translated: linked-report-l1 in cron.d-linked.yaml" in lines
    assert (f"{rhel}/var/spool/cron/shop: refused: cron skips it: it has 2 hard links, and cron reads a crontab with one "
            "only (cron: NUMBER OF HARD LINKS > 1; cronie: BAD LINK COUNT)") in lines


def test_cronie_skips_a_crontab_someone_may_execute(rhel, tmp_path):
    # cronie's check_open(): `(st_mode & 07533) != 0400` is BAD FILE MODE, an executable
    # cron.d file included (Debian's cron reads it).
    _put(rhel, "etc/cron.d/exec", "0 3 * * * root /usr/local/bin/planted\n", 0o755)
    r = _jobgen("import-crontab", "--host", "--root", str(rhel), "-o", str(tmp_path / "out"))
    assert (f"{rhel}/etc/cron.d/exec: refused: cron skips it: mode 0755; cronie reads a crontab its owner reads and no one "
            "executes, which no group or other writes (cron: BAD FILE MODE)") in r.stdout.splitlines()
    assert "planted" not in "".join(p.read_text() for p in (tmp_path / "out").iterdir())


def test_debian_s_cron_does_not_follow_a_link_to_a_user_crontab(image, tmp_path):
    img = str(image)
    spool = image / "var/spool/cron/crontabs"
    (spool / "shop").rename(image / "shop-crontab")
    (spool / "shop").symlink_to("../../../../shop-crontab")
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert (f"{img}/var/spool/cron/crontabs/shop: refused: cron skips it: a symbolic link, which Debian's cron does not "
            "follow to a user crontab (cron: CAN'T OPEN)") in r.stdout.splitlines()
    assert r.returncode == 1 and not (tmp_path / "out" / "user-shop.yaml").exists()

def test_debian_s_cron_reads_a_user_crontab_of_mode_0600_only(image, tmp_path):
    img = str(image)
    _put(image, "var/spool/cron/crontabs/shop", "*/10 * * * * /usr/local/bin/sync-stock --quiet\n", 0o644)
    r = _jobgen("import-crontab", "--host", "--root", img, "-o", str(tmp_path / "out"))
    assert (f"{img}/var/spool/cron/crontabs/shop: refused: cron skips it: mode 0644; Debian's cron reads a user crontab "
            "of mode 0600 only (cron: INSECURE MODE (mode 0600 expected))") in r.stdout.splitlines()
    assert r.returncode == 1 and not (tmp_path / "out" / "user-shop.yaml").exists()


def test_cronie_reads_a_user_crontab_only_its_owner_writes_whatever_its_mode(rhel, tmp_path):
    _put(rhel, "etc/passwd", f"root:x:0:0::/root:/bin/bash\nshop:x:{os.getuid()}:100::/home/shop:/bin/sh\n")
    _put(rhel, "var/spool/cron/shop", "*/10 * * * * /usr/local/bin/sync-stock --quiet\n", 0o644)
    r = _jobgen("import-crontab", "--host", "--root", str(rhel), "-o", str(tmp_path / "out"))
    assert f"{rhel}/var/spool/cron/shop:1: translated: shop-sync-stock-l1 in user-shop.yaml" in r.stdout.splitlines()
