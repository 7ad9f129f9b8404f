"""What is in a spool is not trusted: a full disk, truncated and hostile files.

A request counts only once it is completely written and synced; a write that fails is "not
enqueued" (one line, exit 71). A file in the spool that is not a complete request is moved
to malformed/ (one set-aside line, a listing entry) and never stops the requests around it;
no content makes `enqueue`, `drain` or `queue` print a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import pytest

from jobgen.contract.queue import EXIT_SPOOL, MAX_REQUEST_BYTES, SET_ASIDE, SPOOL_FOLDERS
from jobgen.runtime.queue.spool import FAILED, PENDING, RUNNING, Spool, TooBig
from support.cli import jobgen as run_jobgen

ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path)}
# Where there is no journald (this machine: PID 1 is not systemd) the set-aside lines go to
# stderr, where the test reads them.
NO_JOURNAL = not os.path.exists("/run/systemd/journal/socket")


jobgen = partial(run_jobgen, env=ENV)  # the units' minimal environment


def store(spool: Path) -> list[str]:
    return ["--spool", str(spool), "--job", "export"]


def listing(spool: Path) -> dict:
    r = jobgen("queue", *store(spool), "--format", "json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def enqueue(spool: Path, *args: str) -> str:
    r = jobgen("enqueue", *store(spool), "--", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


# --------------------------------------------------------------------------- a full disk


@pytest.fixture
def small_tmpfs():
    """A real tmpfs of 256 KiB, unmounted after the test (needs root: mount(2))."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="jobgen-fullfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "jobgen-test", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


def fill_to_one_page(fs: Path) -> Path:
    """Fill the file system, then free exactly one page: the next bigger write is short."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)
    size = filler.stat().st_size
    os.truncate(filler, size - 4096)
    return filler


def test_a_request_that_does_not_fit_on_a_full_disk_is_not_enqueued(small_tmpfs):
    spool = small_tmpfs / "spool"
    spool.mkdir(mode=0o700)
    first = enqueue(spool, "before-the-disk-filled")  # also creates seq: its rewrite needs no new page
    fill_to_one_page(small_tmpfs)
    big = "x" * 10_000  # a request of ~10 KB: 4,096 bytes fit, the rest does not
    r = jobgen("enqueue", *store(spool), "--", big)
    tmp_name = r.stderr.rsplit(": ", 1)[-1].strip()
    assert (r.returncode, r.stdout) == (EXIT_SPOOL, "")
    assert r.stderr.splitlines()[-1] == (
        f"jobgen enqueue: export: rejected: request not recorded: cannot write the spool: No space left on device: {tmp_name}"
    )
    assert Path(tmp_name).parent == spool / "tmp" and not Path(tmp_name).exists()
    assert os.listdir(spool / "tmp") == []  # the short file is gone, not renamed into pending/
    assert [r["id"] for r in listing(spool)["requests"]] == [first]
    # The request before it still runs, and the queue works on.
    out = small_tmpfs / "ran"
    d = jobgen("drain", *store(spool), "--", "/bin/sh", "-c", f'echo "$*" >> {out}', "job")
    assert d.returncode == 0, d.stderr
    assert out.read_text() == "before-the-disk-filled\n"


# --------------------------------------------------------------------------- hostile files

GOOD = {"args": ["a"], "attempts": 0, "by": "test", "enqueued_usec": 1, "last_status": None}
NAME = "00000000000000000002-0badf00d"


def doc(**changes) -> bytes:
    return json.dumps({"id": NAME, **GOOD, **changes}).encode()


# (what it is, how to make it in pending/ as NAME.json, the reason `queue` lists)
HOSTILE = [
    ("a request cut short", lambda p: p.write_bytes(doc()[:30]), "not JSON (30 bytes; a request cut short, or not one)"),
    ("4,096 bytes of a short write", lambda p: p.write_bytes(b"{" + b"x" * 4095), "not JSON (4096 bytes; a request cut short, or not one)"),
    ("empty", lambda p: p.write_bytes(b""), "not JSON (0 bytes; a request cut short, or not one)"),
    ("binary", lambda p: p.write_bytes(b"\xff\xfe\x00"), "not UTF-8 text"),
    ("a JSON list", lambda p: p.write_bytes(b"[1, 2]"), "JSON list, not an object"),
    ("deeply nested JSON", lambda p: p.write_bytes(b"[" * 100_000), "not JSON (100000 bytes; a request cut short, or not one)"),
    ("no id", lambda p: p.write_bytes(json.dumps(GOOD).encode()), "no 'id'"),
    ("attempts as text", lambda p: p.write_bytes(doc(attempts="1")), "'attempts' is str, not int"),
    ("attempts as a boolean", lambda p: p.write_bytes(doc(attempts=True)), "'attempts' is bool, not int"),
    ("args not strings", lambda p: p.write_bytes(doc(args=[1, {"x": 2}])), "'args' holds something other than strings"),
    ("a negative attempt count", lambda p: p.write_bytes(doc(attempts=-5)), f"'attempts' is out of range (0 to {2**63 - 1})"),
    # Each of these read as a request, then failed every drain with a traceback before or
    # at its start (exec's "embedded null byte", a surrogate no byte stands for, a count of
    # 4,300 digits that json could read and not write back), blocking the queue.
    ("a NUL in an argument", lambda p: p.write_bytes(doc(args=["a\0b"])), "'args' holds a NUL character, which no command line can"),
    ("a lone surrogate in an argument", lambda p: p.write_bytes(doc(args=["a\ud800b"])),
     "'args' holds a lone surrogate (a character that is no byte), which no command line can"),
    ("a NUL in what enqueued it", lambda p: p.write_bytes(doc(by="x\0")), "'by' holds a NUL character, which no command line can"),
    ("an attempt count of 4,300 digits", lambda p: p.write_bytes(doc(attempts=10**4300 - 1)), f"'attempts' is out of range (0 to {2**63 - 1})"),
    ("an exit status past 255", lambda p: p.write_bytes(doc(last_status=256)), "'last_status' is out of range (0 to 255)"),
    ("a field jobgen never writes", lambda p: p.write_bytes(doc(run_as="root")), "'run_as' is not a field of a request"),
    ("huge", lambda p: p.write_bytes(b" " * (MAX_REQUEST_BYTES + 1)), f"{MAX_REQUEST_BYTES + 1} bytes, more than a request can be ({MAX_REQUEST_BYTES})"),
    ("a symlink to /etc/passwd", lambda p: p.symlink_to("/etc/passwd"), "a symbolic link"),
    ("a folder", lambda p: p.mkdir(), "not a regular file"),
    ("a FIFO", lambda p: os.mkfifo(p), "not a regular file"),
    # B: a name that is not its id would be listed twice and retried forever.
    ("an id that is not its name", lambda p: p.write_bytes(doc(id="00000000000000000001-00000000")),
     "its id '00000000000000000001-00000000' is not its file name"),
]


@pytest.mark.parametrize("what, make, why", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_file_that_is_not_a_request_is_set_aside_and_the_queue_goes_on(tmp_path, what, make, why):
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    before = enqueue(spool, "before")
    make(spool / PENDING / f"{NAME}.json")
    (spool / "seq").write_text("2\n")  # the next request comes after the hostile one
    # Every command still works: enqueue, list, drop, drain; the bad file is reported once.
    after = enqueue(spool, "after")
    r = jobgen("queue", *store(spool))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[0] == f"# export: 2 pending, 0 running, 0 failed, 1 {SET_ASIDE}"
    assert r.stdout.splitlines()[-1] == f"{SET_ASIDE} {spool / SET_ASIDE / (NAME + '.json')}  ({why}; never run: inspect it, then remove it)"
    doc_ = listing(spool)
    assert [x["id"] for x in doc_["requests"]] == [before, after]
    assert doc_[SET_ASIDE] == [{"file": str(spool / SET_ASIDE / f"{NAME}.json"), "why": why}]
    out = tmp_path / "ran"
    d = jobgen("drain", *store(spool), "--", "/bin/sh", "-c", f'echo "$*" >> {out}', "job")
    assert d.returncode == 0 and "Traceback" not in d.stderr, d.stderr
    assert out.read_text() == "before\nafter\n"
    assert os.listdir(spool / PENDING) == []
    assert jobgen("queue", *store(spool), "--drop", NAME).returncode == 65  # not a request: nothing to drop


@pytest.mark.skipif(not NO_JOURNAL, reason="the line goes to journald on this machine")
def test_set_aside_is_said_once_where_it_happened(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    (spool / PENDING).mkdir(mode=0o700)
    (spool / PENDING / f"{NAME}.json").write_bytes(b"{")
    r = jobgen("enqueue", *store(spool))
    set_aside = [line for line in r.stderr.splitlines() if "set-aside" in line]
    assert set_aside == [
        f"jobgen: export: set-aside: pending/{NAME}.json is not a complete request "
        f"(not JSON (1 bytes; a request cut short, or not one)): moved to {spool / SET_ASIDE / (NAME + '.json')}, never run"
    ]
    again = jobgen("enqueue", *store(spool))
    assert "set-aside" not in again.stderr


@pytest.mark.skipif(not NO_JOURNAL, reason="the line goes to journald on this machine")
def test_a_name_with_a_newline_stays_on_one_line(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    (spool / PENDING).mkdir(mode=0o700)
    (spool / PENDING / "x\npending  00000000000000000009-00000000  forged").write_text("x")
    r = jobgen("queue", *store(spool))
    assert r.returncode == 0
    assert r.stdout.splitlines()[1:] == [
        f"{SET_ASIDE} {spool / SET_ASIDE}/x\\npending  00000000000000000009-00000000  forged  "
        "(its name is not a request id (SEQ-HEX.json); never run: inspect it, then remove it)"
    ]
    assert len(r.stderr.splitlines()) == 1 and "x\\npending" in r.stderr


def test_arguments_with_a_newline_stay_on_their_request_row(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    rid = enqueue(spool, "a\nfailed   00000000000000000009-deadbeef  age 0s  attempts 3", "\x1b[2K")
    r = jobgen("queue", *store(spool))
    assert r.returncode == 0
    (row,) = r.stdout.splitlines()[1:]
    assert row.startswith(f"pending  {rid}  age ")
    assert row.endswith("attempts 0  a\\nfailed   00000000000000000009-deadbeef  age 0s  attempts 3 \\x1b[2K")
    assert listing(spool)["requests"][0]["args"] == ["a\nfailed   00000000000000000009-deadbeef  age 0s  attempts 3", "\x1b[2K"]


def test_any_name_in_pending_is_set_aside_so_the_path_unit_does_not_loop(tmp_path):
    # DirectoryNotEmpty= starts the drainer while pending/ has any entry: a stray name that
    # the drainer skipped would start it again and again.
    s = Spool(tmp_path / "spool")
    s.root.mkdir(mode=0o700)
    s.create()
    for stray in ("notes.txt", ".leftover.tmp", f"{NAME}.json~"):
        (s.root / PENDING / stray).write_text("x")
    seen = []
    s.report = seen.append
    assert s.list(PENDING) == []
    assert os.listdir(s.root / PENDING) == []
    assert sorted(a.name for a in seen) == sorted([".leftover.tmp", "notes.txt", f"{NAME}.json~"])
    assert {a.reason for a in seen} == {"its name is not a request id (SEQ-HEX.json)"}


def test_a_file_of_another_owner_is_set_aside(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    s = Spool(tmp_path / "spool")
    s.root.mkdir(mode=0o700)
    s.create()
    rid = s.enqueue(("mine",)).request.id
    planted = s.root / PENDING / f"{NAME}.json"
    planted.write_bytes(doc())
    nobody = pwd.getpwnam("nobody")
    os.chown(planted, nobody.pw_uid, nobody.pw_gid)
    seen = []
    s.report = seen.append
    assert [r.id for r in s.list(PENDING)] == [rid]
    assert [(a.name, a.reason) for a in seen] == [(f"{NAME}.json", f"owned by uid {nobody.pw_uid}, not by the spool's owner (uid 0)")]


def test_root_enqueueing_into_a_users_spool_hands_the_file_to_that_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    nobody = pwd.getpwnam("nobody")
    s = Spool(tmp_path / "spool")
    s.root.mkdir(mode=0o700)
    os.chown(s.root, nobody.pw_uid, nobody.pw_gid)
    rid = s.enqueue(("x",)).request.id
    st = (s.root / PENDING / f"{rid}.json").stat()
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    assert [r.id for r in s.list(PENDING)] == [rid]  # not "another owner"


def test_ids_from_operators_are_ids_not_paths(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    r = jobgen("queue", *store(spool), "--drop", "../../victim")
    assert (r.returncode, r.stderr) == (65, "jobgen queue: no such request: ../../victim\n")
    assert victim.exists()


def test_arguments_too_big_for_a_request_are_refused(tmp_path):
    # (One argv string is at most 128 KiB, execve(2) MAX_ARG_STRLEN: many of them, here.)
    s = Spool(tmp_path / "spool")
    s.root.mkdir(mode=0o700)
    s.create()
    with pytest.raises(TooBig, match=r"^the arguments make a request of [0-9]+ bytes; at most 1048512$"):
        s.enqueue(("y" * 100_000,) * 11)
    assert os.listdir(s.root / PENDING) == [] and os.listdir(s.root / "tmp") == []


@pytest.fixture
def public_tmp():
    """A folder another user can reach (pytest's own tmp_path is root's, 0700)."""
    where = Path(tempfile.mkdtemp(prefix="jobgen-spool-"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where)


def test_a_folder_the_drainer_cannot_move_is_skipped_and_the_queue_goes_on(public_tmp):
    # rename(2) of a folder needs write access to it ('..' changes): root's folder in a
    # user's pending/ cannot be moved by that user. It is skipped, said, and not run.
    if os.geteuid() != 0:
        pytest.skip("needs root to act as two users")
    nobody = pwd.getpwnam("nobody")
    root = public_tmp / "spool"
    root.mkdir(mode=0o700)
    for sub in ("", "/tmp", "/pending", "/running", "/failed", f"/{SET_ASIDE}"):
        Path(f"{root}{sub}").mkdir(mode=0o700, exist_ok=True)
        os.chown(f"{root}{sub}", nobody.pw_uid, nobody.pw_gid)
    (root / PENDING / f"{NAME}.json").mkdir(mode=0o700)  # root's
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from jobgen.runtime.queue.spool import Spool\n"
        "s = Spool(Path(sys.argv[1]))\n"
        "seen = []\n"
        "s.report = seen.append\n"
        "rid = s.enqueue(('x',)).request.id\n"
        "print([r.id == rid for r in s.list('pending')], [(a.name, a.reason, a.moved_to) for a in seen])\n"
    )
    r = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                        sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"[True] [('{NAME}.json', 'not a regular file; cannot move it: Permission denied', ''), "
        f"('{NAME}.json', 'not a regular file; cannot move it: Permission denied', '')]"
    )


@pytest.mark.parametrize("counter", ["9" * 20, "1" * 64 + "\n", "1" * 5000])
def test_a_counter_too_big_for_an_id_does_not_lose_the_next_request(tmp_path, counter):
    # A request named from such a number is not a request id: it was reported enqueued,
    # then set aside by the next listing and never run.
    spool = tmp_path / "spool"
    spool.mkdir()
    first = enqueue(spool, "a")
    (spool / "seq").write_text(counter)
    r = jobgen("enqueue", *store(spool), "--", "b")
    assert r.returncode == 0, r.stderr
    second = r.stdout.strip()
    assert second.startswith(f"{2:020d}-")
    doc = listing(spool)
    assert [(q["id"], q["args"]) for q in doc["requests"]] == [(first, ["a"]), (second, ["b"])]
    assert doc[SET_ASIDE] == []


@pytest.mark.parametrize("state", [RUNNING, FAILED])
def test_a_file_named_as_the_last_request_number_that_is_not_one_is_set_aside_by_enqueue(tmp_path, state):
    # Numbers come after the highest request on disk, which enqueue judged by names alone:
    # a planted failed/99999999999999999999-deadbeef.json refused every enqueue ("rejected:
    # request not recorded: cannot write the spool: no request number left after
    # 99999999999999999999: SPOOL/seq", exit 71). Only the names that decide the number
    # are read, from the highest down: the one below the request that decides it is not.
    spool = tmp_path / "spool"
    spool.mkdir()
    first = enqueue(spool, "a")
    os.rename(spool / PENDING / f"{first}.json", spool / state / f"{first}.json")
    top, below = "99999999999999999999-deadbeef.json", "00000000000000000000-00000000.json"
    for name in (top, below):
        (spool / state / name).write_text("garbage")
    r = jobgen("enqueue", *store(spool), "--", "b")
    second = r.stdout.strip()
    assert (r.returncode, second[:21]) == (0, f"{2:020d}-"), r.stderr
    assert r.stderr.splitlines()[-1] == f"jobgen enqueue: export: enqueued: {second} (1 pending)"
    assert sorted(os.listdir(spool / state)) == [below, f"{first}.json"]
    assert (spool / SET_ASIDE / top).read_text() == "garbage"
    # The listing reads every file: it sets aside the one below too.
    assert listing(spool)[SET_ASIDE] == [{"file": str(spool / SET_ASIDE / name), "why": "not JSON (7 bytes; a request cut short, or not one)"}
                                         for name in (below, top)]


@pytest.mark.parametrize("what,damage", [
    ("emptied", lambda seq: seq.write_text("")),
    ("put back from an older copy", lambda seq: seq.write_text("1\n")),
    ("replaced by a FIFO (reads as nothing)", lambda seq: (seq.unlink(), os.mkfifo(seq))),
])
def test_a_counter_behind_the_requests_on_disk_does_not_jump_the_queue(tmp_path, what, damage):
    # Requests run in name order: a new one numbered below waiting ones would run first.
    spool = tmp_path / "spool"
    spool.mkdir()
    waiting = [enqueue(spool, arg) for arg in ("one", "two", "three")]
    damage(spool / "seq")
    late = enqueue(spool, "four")
    assert late.startswith(f"{4:020d}-")
    assert [(q["id"], q["args"]) for q in listing(spool)["requests"]] == [*zip(waiting, [["one"], ["two"], ["three"]]), (late, ["four"])]
    assert (spool / "seq").read_text() == "4\n"


def test_what_root_makes_in_a_users_spool_is_that_users(public_tmp):
    # Root's enqueue into a fresh user spool (the units' form typed as root) made tmp/,
    # pending/, ... and .enqueue.lock root's, 0700/0600: the user's timer could enqueue no
    # more and its drainer never ran again ('cannot use the queue: Permission denied').
    # Likewise malformed/, made by root's listing after an operator removed the folder.
    if os.geteuid() != 0:
        pytest.skip("needs root to act as two users")
    nobody = pwd.getpwnam("nobody")
    spool = public_tmp / "spool"
    spool.mkdir(mode=0o700)
    os.chown(spool, nobody.pw_uid, nobody.pw_gid)
    first = enqueue(spool, "by-root")
    (spool / PENDING / "stray").write_text("")
    os.chown(spool / PENDING / "stray", nobody.pw_uid, nobody.pw_gid)
    (spool / SET_ASIDE).rmdir()
    assert [q["id"] for q in listing(spool)["requests"]] == [first]
    assert {p.name: (p.lstat().st_uid, p.lstat().st_gid) for p in spool.iterdir()} == dict.fromkeys(
        [".enqueue.lock", "seq", *SPOOL_FOLDERS], (nobody.pw_uid, nobody.pw_gid))
    as_user = partial(jobgen, prefix=("setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"))
    second = as_user("enqueue", *store(spool), "--", "by-the-user")
    assert second.returncode == 0, second.stderr
    drained = as_user("drain", *store(spool), "--", "/bin/true")
    assert drained.returncode == 0, drained.stderr
    r = as_user("queue", *store(spool), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requests"] == []


@pytest.mark.parametrize("link", [PENDING, SET_ASIDE])
def test_root_in_a_users_spool_moves_nothing_through_a_link_the_user_planted(public_tmp, link):
    # The units' form typed as root on a user's spool. pending -> /etc had root move every
    # file of /etc into the user's malformed/; malformed -> /etc/profile.d had root rename a
    # file the user wrote (pending/evil.sh) into it. Root now acts as the spool's owner.
    if os.geteuid() != 0:
        pytest.skip("needs root to act as two users")
    nobody = pwd.getpwnam("nobody")
    spool = public_tmp / "spool"
    spool.mkdir(mode=0o700)
    os.chown(spool, nobody.pw_uid, nobody.pw_gid)
    victim = public_tmp / "etc"
    victim.mkdir()
    (victim / "shadow").write_text("root:secret\n")
    (spool / link).symlink_to(victim)
    os.lchown(spool / link, nobody.pw_uid, nobody.pw_gid)
    if link == SET_ASIDE:
        (spool / PENDING).mkdir(mode=0o700)
        (spool / PENDING / "evil.sh").write_text("echo owned\n")
        for path in (spool / PENDING, spool / PENDING / "evil.sh"):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    for verb in ("queue", "drain"):
        r = jobgen(verb, *store(spool), "--", "/bin/true")
        assert "Traceback" not in r.stderr
    assert sorted(p.name for p in victim.iterdir()) == ["shadow"]
    assert (victim / "shadow").read_text() == "root:secret\n" and (victim / "shadow").stat().st_uid == 0


def test_a_listing_shows_an_argument_that_is_not_utf8_as_its_bytes_and_stays_utf8_json(tmp_path):
    # An argument from argv is bytes: one that is not UTF-8 reached the JSON as a lone
    # surrogate escape ("\\udce9"), which strict JSON parsers refuse. Now, as journalctl
    # gives such a field, the array of its bytes; the text listing escapes it.
    spool = tmp_path / "spool"
    spool.mkdir()
    rid = enqueue(spool, os.fsdecode(b"caf\xe9"), "ok")
    r = jobgen("queue", *store(spool), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "\\ud" not in r.stdout
    (request,) = json.loads(r.stdout)["requests"]
    assert (request["id"], request["args"]) == (rid, [list(b"caf\xe9"), "ok"])
    text = jobgen("queue", *store(spool)).stdout.splitlines()
    assert text[1].startswith(f"pending  {rid}  age ") and text[1].split("  attempts 0  ")[1] == "caf\\xe9 ok"
