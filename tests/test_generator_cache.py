"""jobgen-generator's compiled cache (host/gencache.py): a second run with the same inputs
writes the same bytes without compiling; any changed input is a miss; a cache entry that
is not exactly what this program stored is a miss and one note, never a wrong unit.

Each CLI test runs the real console script into tmp_path/normal with the cache in
tmp_path/cache/jobgen/generator, moves what the first run wrote aside, runs again and
compares. A hit is recognised by what it loads (-X importtime): no compiler, no PyYAML,
no jinja2.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobgen.host import gencache, machine

GENERATOR = Path(sys.executable).with_name("jobgen-generator")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# What a hit must not load: the compiler and everything it stands on.
COMPILING = ("jinja2", "yaml", "packaging", "typer", "click", "jobgen.compiler", "jobgen.host.generator",
             "jobgen.contract", "jobgen.runtime")
# The folder rule both caches share: standard library only (compiler/__init__ is a docstring);
# and the first line of generated files (compiler/header.py, constants), which the unit pair
# that keeps entries across boots starts with (host/genpersist.py); and the interpreter's
# sha256 every digest of jobgen's is taken with (contract/digest.py, standard library only).
SHARED_RULE = ("jobgen.compiler", "jobgen.compiler.trust", "jobgen.compiler.header", "jobgen.contract", "jobgen.contract.digest")


def job(name: str, command: str = "/bin/true", target: str = '"252"') -> str:
    return f"jobgen: 1\ntarget:\n  systemd: {target}\njobs:\n  {name}:\n    command: [{command}]\n    schedule: daily\n"


def imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:") and "|" in line}


class Run:
    def __init__(self, r: subprocess.CompletedProcess, out: Path):
        self.returncode, self.out = r.returncode, out
        self.modules = imported(r.stderr)
        self.stderr = "".join(line + "\n" for line in r.stderr.splitlines() if not line.startswith("import time:"))
        self.compiled = any(m.startswith("jobgen.compiler") and m not in SHARED_RULE for m in self.modules)

    @property
    def loaded_for_compiling(self) -> list[str]:
        return sorted(m for m in self.modules if m.startswith(COMPILING) and m not in SHARED_RULE)


def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "jobgen" / "generator"


def generate(tmp_path: Path, *dirs: Path, args: list[str] | None = None, env: dict[str, str] | None = None) -> Run:
    """One run into tmp_path/normal (emptied first, as systemd does)."""
    out = tmp_path / "normal"
    shutil.rmtree(out, ignore_errors=True)
    (tmp_path / "cache").mkdir(exist_ok=True)  # as /var/cache is: the run makes jobgen/generator
    argv = args if args is not None else [str(out), str(tmp_path / "early"), str(tmp_path / "late")]
    environ = {"PATH": os.environ["PATH"], "JOBGEN_MANIFEST_DIRS": ":".join(map(str, dirs)),
               "JOBGEN_GENERATOR_CACHE": str(cache_dir(tmp_path)), "PYTHONPROFILEIMPORTTIME": "1", **(env or {})}
    r = subprocess.run([str(GENERATOR), *argv], capture_output=True, text=True, env=environ, timeout=300)
    return Run(r, out)


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry below folder: (kind, mode, bytes or link target)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        rel = str(path.relative_to(folder))
        if stat.S_ISLNK(st.st_mode):
            found[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(st.st_mode):
            found[rel] = ("dir", stat.S_IMODE(st.st_mode))
        else:
            found[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return found


def entries(tmp_path: Path) -> list[Path]:
    return sorted(cache_dir(tmp_path).glob("*.entry")) if cache_dir(tmp_path).is_dir() else []


def folder_with(tmp_path: Path, **files: str) -> Path:
    src = tmp_path / "etc"
    src.mkdir(exist_ok=True)
    for name, text in files.items():
        (src / name).write_text(text)
    return src


# --------------------------------------------------------------------------- hit == miss

@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_a_hit_writes_what_a_miss_writes_byte_for_byte_for_every_example(tmp_path: Path, example: str) -> None:
    src = tmp_path / "etc"
    src.mkdir()
    shutil.copy(EXAMPLES / example, src / example)
    miss = generate(tmp_path, src)
    assert miss.returncode == 0 and miss.compiled, miss.stderr
    assert len(entries(tmp_path)) == 1
    written = snapshot(miss.out)
    assert written  # the example generated units

    hit = generate(tmp_path, src)
    assert hit.returncode == 0
    assert hit.loaded_for_compiling == []
    assert snapshot(hit.out) == written
    assert hit.stderr == miss.stderr


def test_a_hit_repeats_the_warnings_the_miss_printed(tmp_path: Path) -> None:
    # A target that leaves out the running systemd is a warning at every run, hit or not.
    running = machine.running_systemd()[0]
    if running is None:
        pytest.fail("no libsystemd-shared on this machine: apt-get install systemd")
    other = 247 if running != 247 else 252
    src = folder_with(tmp_path, **{"old.yaml": job("old", target=f'"{other}"')})
    miss = generate(tmp_path, src)
    hit = generate(tmp_path, src)
    assert miss.stderr == hit.stderr == (f"{src}/old.yaml:3:12: warning: target {other} does not include the running "
                                         f"systemd {running}; its units may use directives this systemd ignores\n")
    assert miss.compiled and hit.loaded_for_compiling == []


def test_at_a_container_boot_a_hit_leaves_the_same_boot_report_as_the_miss(tmp_path: Path, monkeypatch) -> None:
    # Run by systemd with neither /dev/kmsg nor journald (a container's first pass at boot):
    # the warnings a hit repeats go into the generated report unit as the miss's did.
    from jobgen.cli import generator as cli

    running = machine.running_systemd()[0] or 257
    src = folder_with(tmp_path, **{"old.yaml": job("old", target=f'"{247 if running != 247 else 252}"')})
    monkeypatch.setattr(cli, "KMSG", str(tmp_path / "no-kmsg"))
    monkeypatch.setattr(cli, "JOURNAL_SOCKET", str(tmp_path / "no-journal"))
    (tmp_path / "cache").mkdir()
    env = {"JOBGEN_MANIFEST_DIRS": str(src), "JOBGEN_GENERATOR_CACHE": str(cache_dir(tmp_path)),
           "SYSTEMD_EXEC_PID": str(os.getpid())}
    trees, inodes = [], []
    for _ in range(2):
        out = tmp_path / "normal"
        shutil.rmtree(out, ignore_errors=True)
        # In this process the program "starts" now: the deadline counts from its start
        # (cli/generator.py _STARTED), not from when a long test session imported it.
        monkeypatch.setattr(cli, "_STARTED", time.monotonic())
        assert cli.run([str(out)], env) == 0
        trees.append(snapshot(out))
        inodes.append([e.stat().st_ino for e in entries(tmp_path)])
    assert len(inodes[0]) == 1 and inodes[1] == inodes[0]  # read, not stored again: a hit
    assert trees[0] == trees[1]
    assert trees[1]["jobgen/report"][2].startswith(b"<4>" + f"{src}/old.yaml:3:12: warning: target".encode())
    assert "jobgen-generator-report.service" in trees[1]


# --------------------------------------------------------------------------- invalidation

def test_a_changed_manifest_byte_is_a_miss(tmp_path: Path) -> None:
    src = folder_with(tmp_path, **{"a.yaml": job("a", "/bin/true")})
    generate(tmp_path, src)
    (src / "a.yaml").write_text(job("a", "/bin/false"))
    run = generate(tmp_path, src)
    assert run.compiled
    assert " /bin/false\n" in (run.out / "a.service").read_text()
    assert len(entries(tmp_path)) == 2  # one per set of inputs
    assert not generate(tmp_path, src).compiled


def test_etc_over_usr_lib_and_masking_decide_before_the_cache(tmp_path: Path) -> None:
    etc, usr = tmp_path / "etc", tmp_path / "usr-lib"
    usr.mkdir()
    (usr / "a.yaml").write_text(job("a", "/bin/true"))
    etc.mkdir()
    generate(tmp_path, etc, usr)
    (etc / "a.yaml").write_text(job("a", "/bin/false"))  # the administrator's copy wins
    run = generate(tmp_path, etc, usr)
    assert run.compiled and " /bin/false\n" in (run.out / "a.service").read_text()
    (etc / "a.yaml").write_text("")  # masked
    run = generate(tmp_path, etc, usr)
    assert run.returncode == 0 and not run.out.exists()


def test_other_output_folders_are_a_miss(tmp_path: Path) -> None:
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    generate(tmp_path, src)
    out = str(tmp_path / "normal")
    assert generate(tmp_path, src, args=[out]).compiled  # one folder instead of three
    assert generate(tmp_path, src, args=[out, str(tmp_path / "e2"), str(tmp_path / "l2")]).compiled
    assert not generate(tmp_path, src, args=[out]).compiled


def test_the_key_changes_with_the_code_the_systemd_the_options_and_the_machine(tmp_path: Path, monkeypatch) -> None:
    # In-process: the key a run would compute, one input changed at a time.
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    argv, env, paths = [str(tmp_path / "n"), "e", "l"], {"JOBGEN_MANIFEST_DIRS": str(src)}, [str(src / "a.yaml")]
    code = gencache.code_marks()

    def key(**change) -> str:
        args = {"argv": argv, "env": env, "manifests": paths, "running": (252, "/proc/1/maps"), "program": "/usr/bin/jobgen-generator",
                "code": code, **change}
        return gencache.key(**args)

    base = key()
    assert key() == base  # same inputs, same key
    import jobgen

    monkeypatch.setattr(jobgen, "__version__", jobgen.__version__ + ".post1")
    changed = {
        "jobgen version": key(code=gencache.code_marks()),
        "jobgen code": key(code=[*code[:-1], code[-1] + "x"]),
        "systemd version": key(running=(257, "/proc/1/maps")),
        "output folder": key(argv=[str(tmp_path / "other"), "e", "l"]),
        "manifest folders": key(env={"JOBGEN_MANIFEST_DIRS": f"{src}:/usr/lib/jobgen"}),
        "deadline": key(env={**env, "JOBGEN_GENERATOR_DEADLINE": "10"}),
        "program": key(program="/opt/jobgen/bin/jobgen-generator"),  # its real path: where `jobgen` is looked for
    }
    monkeypatch.undo()
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    monkeypatch.setattr(machine, "VENDOR_UNIT_DIRS", (str(vendor),))
    before = key()
    os.utime(vendor, ns=(1, 1))
    (vendor / "a.timer").write_text("[Timer]\n")  # a package installs a unit named like a job
    changed["vendor unit folder"] = key()
    assert before != changed["vendor unit folder"]
    monkeypatch.undo()
    (src / "a.yaml").write_text(job("a") + "\n")
    changed["manifest bytes"] = key()
    assert len(set(changed.values()) | {base}) == len(changed) + 1, changed


def test_the_code_marks_cover_the_version_and_every_source_file(monkeypatch) -> None:
    import jobgen
    from jobgen.compiler import resources

    marks = gencache.code_marks()
    assert marks[0] == jobgen.__version__
    sources = {str(p) for p in Path(jobgen.__file__).parent.rglob("*.py") if "__pycache__" not in p.parts}
    templates = {str(p) for p in resources.template_dir().glob("*.j2")}
    named = {m.split(" ")[0] for m in marks}
    assert sources | templates <= named
    # The same folders and dependencies as the render cache's digest.
    assert gencache.template_dir(str(Path(jobgen.__file__).parent)) == str(resources.template_dir())
    assert gencache.DEPENDENCIES == resources._DEPENDENCIES


def test_a_hit_writes_with_the_compilers_modes() -> None:
    # gencache keeps its own copies so that a hit imports no compiler module; they must
    # stay the modes a miss writes with (compiler/write.py).
    from jobgen.compiler import write

    assert (gencache.FILE_MODE, gencache.DIR_MODE) == (write.FILE_MODE, write.DIR_MODE)


def test_too_large_a_manifest_is_left_to_the_compiler():
    from jobgen.compiler import limits

    assert gencache.MANIFEST_READ_MAX > limits.MANIFEST_BYTES


# --------------------------------------------------------------------------- never a broken manifest

def test_a_broken_manifest_is_never_served_from_the_cache(tmp_path: Path) -> None:
    src = folder_with(tmp_path, **{"good.yaml": job("good"), "broken.yaml": "jobgen: 1\njobs:\n  x:\n    schedule: daily\n"})
    first = generate(tmp_path, src)
    second = generate(tmp_path, src)
    assert entries(tmp_path) == []  # a run that skipped a manifest is not kept
    assert first.compiled and second.compiled
    assert first.stderr == second.stderr
    assert f"{src}/broken.yaml:3:3: error: job 'x': missing required" in second.stderr
    assert f"jobgen-generator: {src}/broken.yaml skipped" in second.stderr
    assert (second.out / "good.timer").exists() and not (second.out / "x.timer").exists()


# --------------------------------------------------------------------------- where, and what is trusted

def test_an_absent_or_unwritable_cache_is_a_silent_miss(tmp_path: Path) -> None:
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    # /var not mounted yet: no /var/cache below the mount point, nothing is made there.
    unmounted = tmp_path / "var" / "cache" / "jobgen" / "generator"
    (tmp_path / "var").mkdir()
    for _ in range(2):
        run = generate(tmp_path, src, env={"JOBGEN_GENERATOR_CACHE": str(unmounted)})
        assert (run.returncode, run.stderr, run.compiled) == (0, "", True)
    assert os.listdir(tmp_path / "var") == []
    # Once /var/cache is there, the run makes jobgen/generator, 0700, and fills it.
    (tmp_path / "var" / "cache").mkdir()
    run = generate(tmp_path, src, env={"JOBGEN_GENERATOR_CACHE": str(unmounted)})
    assert run.compiled and stat.S_IMODE(unmounted.stat().st_mode) == 0o700
    assert len(list(unmounted.glob("*.entry"))) == 1
    assert not generate(tmp_path, src, env={"JOBGEN_GENERATOR_CACHE": str(unmounted)}).compiled
    # An empty value turns it off.
    run = generate(tmp_path, src, env={"JOBGEN_GENERATOR_CACHE": ""})
    assert run.compiled and run.stderr == ""


def test_where_the_first_folder_cannot_be_written_the_entry_goes_to_the_next(tmp_path: Path) -> None:
    # /var/cache not there (a separate /var not mounted yet) or read-only (systemd 257 runs
    # generators with all but /run read-only): the /run folder takes the entry.
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    unmounted, run_dir = tmp_path / "var" / "cache" / "jobgen" / "generator", tmp_path / "run" / "jobgen-generator"
    (tmp_path / "run").mkdir()
    env = {"JOBGEN_GENERATOR_CACHE": f"{unmounted}:{run_dir}"}
    first = generate(tmp_path, src, env=env)
    assert first.compiled and len(list(run_dir.glob("*.entry"))) == 1 and not (tmp_path / "var").exists()
    written = snapshot(first.out)
    second = generate(tmp_path, src, env=env)
    assert (second.compiled, second.stderr) == (False, "")
    assert snapshot(second.out) == written
    assert gencache.folders({}) == ("/var/cache/jobgen/generator", "/run/jobgen-generator")
    assert gencache.folders({"JOBGEN_GENERATOR_CACHE": ""}) == ()


def _spoil_truncated(entry: Path) -> None:
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])


def _spoil_changed(entry: Path) -> None:
    # Still a whole entry, one unit's bytes changed: the digest no longer matches.
    entry.write_bytes(entry.read_bytes().replace(b" /bin/true\n", b" /bin/evil\n"))


def _spoil_other_key(entry: Path) -> None:
    # Another run's valid entry under this key's name.
    other = entry.read_bytes().replace(b"key ", b"key 0", 1)
    entry.write_bytes(other.replace(b"key 0" + entry.stem.encode(), b"key " + ("0" * 64).encode()))


def _spoil_group_writable(entry: Path) -> None:
    entry.chmod(0o620)


def _spoil_foreign_owner(entry: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    os.chown(entry, 65534, 65534)


def _spoil_symlink(entry: Path) -> None:
    elsewhere = entry.with_name("elsewhere")
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)


def _spoil_fifo(entry: Path) -> None:
    entry.unlink()
    os.mkfifo(entry, 0o600)


SPOILED = {
    "truncated": (_spoil_truncated, "does not hold what its digest says"),
    "changed": (_spoil_changed, "does not hold what its digest says"),
    "another key's entry": (_spoil_other_key, "is not an entry for its key"),
    "writable by its group": (_spoil_group_writable, "with mode 0620"),
    "another user's": (_spoil_foreign_owner, "belongs to uid 65534"),
    "a symbolic link": (_spoil_symlink, "is a symbolic link"),
    "a FIFO": (_spoil_fifo, "is not a regular file"),
}


@pytest.mark.parametrize("case", SPOILED)
def test_a_spoiled_entry_is_a_miss_and_one_note_never_a_wrong_unit(tmp_path: Path, case: str) -> None:
    spoil, why = SPOILED[case]
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    good = generate(tmp_path, src)
    expected = snapshot(good.out)
    [entry] = entries(tmp_path)
    spoil(entry)
    run = generate(tmp_path, src)
    assert run.returncode == 0 and run.compiled
    assert snapshot(run.out) == expected
    [note] = run.stderr.splitlines()
    assert note.startswith(f"jobgen-generator: compiled cache not used: {entry}") and why in note, note
    assert note.endswith("; compiling the manifests")
    # The miss wrote a good entry in its place: the next run is a hit, with nothing to say.
    again = generate(tmp_path, src)
    assert (again.compiled, again.stderr) == (False, "")
    assert snapshot(again.out) == expected


@pytest.mark.parametrize("case", ["a link", "writable by others", "another user's"])
def test_an_unsafe_cache_folder_is_a_miss_and_one_note(tmp_path: Path, case: str) -> None:
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    real = tmp_path / "real"
    generate(tmp_path, src, env={"JOBGEN_GENERATOR_CACHE": str(real)})
    parent = tmp_path / "cache" / "jobgen"
    parent.mkdir(parents=True, exist_ok=True)
    where = parent / "generator"
    if case == "a link":
        where.symlink_to(real)
        why = f"{where} is a symbolic link (to {real})"
    elif case == "writable by others":
        shutil.copytree(real, where)
        where.chmod(0o777)
        why = f"{where} can be written by others (mode 0777)"
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to give a folder to another user")
        shutil.copytree(real, where)
        os.chown(where, 65534, 65534)
        why = f"{where} belongs to uid 65534, not to root"
    run = generate(tmp_path, src)
    assert run.compiled
    assert run.stderr == f"jobgen-generator: compiled cache not used: {why}; compiling the manifests\n"


@pytest.mark.parametrize(("files", "links"), [
    ({"../escape.service": b"x"}, {}),
    ({"/etc/passwd": b"x"}, {}),
    ({"a/b/c.service": b"x"}, {}),
    ({".jobgen-journal": b"x"}, {}),
    ({}, {"timers.target.wants/a.timer": "/etc/shadow"}),
    ({}, {"etc/a.timer": "../a.timer"}),
])
def test_an_entry_naming_a_path_the_generator_never_writes_is_refused(files, links) -> None:
    # A record store() would never write, even with a matching digest.
    data = gencache.serialize("k" * 64, gencache.Entry(files, links, []))
    with pytest.raises(gencache.Untrusted, match="holds a record the generator never writes"):
        gencache.parse(data, "k" * 64, "entry")


def test_what_is_stored_is_what_is_read_back() -> None:
    entry = gencache.Entry({"a.service": b"[Service]\n\n", "a.service.d/x.conf": b""},
                           {"timers.target.wants/a.timer": "../a.timer"}, [("warning", "a: line")])
    back = gencache.parse(gencache.serialize("k" * 64, entry), "k" * 64, "entry")
    assert (back.files, back.links, back.lines) == (entry.files, entry.links, entry.lines)


# --------------------------------------------------------------------------- concurrency

WRITER = """
import sys
from jobgen.host import gencache
where, key, tag = sys.argv[1:]
for i in range(40):
    body = (tag * (1000 + i)).encode()
    gencache.store(where, key, gencache.Entry({"a.service": body}, {}, []))
"""


def test_writers_at_once_never_leave_a_broken_entry(tmp_path: Path) -> None:
    # Four processes store the same key over and over while this one reads it: every read
    # is a whole entry of one writer or nothing, and no temporary file is left.
    where = str(tmp_path / "cache")
    os.mkdir(where, 0o700)
    key = "c" * 64
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, where, key, tag]) for tag in "wxyz"]
    seen = set()
    while any(w.poll() is None for w in writers):
        entry = gencache.lookup(where, key)  # raises Untrusted on a torn entry
        if entry is not None:
            body = entry.files["a.service"]
            assert body == body[:1] * len(body)
            seen.add(body[:1])
    assert [w.wait() for w in writers] == [0, 0, 0, 0]
    assert gencache.lookup(where, key) is not None
    assert os.listdir(where) == [key + gencache.SUFFIX]
    assert seen  # the reader did read while they wrote


def test_old_entries_are_trimmed_to_the_newest(tmp_path: Path) -> None:
    where = str(tmp_path / "cache")
    for i in range(gencache.KEEP + 3):
        gencache.store(where, f"{i:064x}", gencache.Entry({"a.service": b"x"}, {}, []))
        os.utime(os.path.join(where, f"{i:064x}{gencache.SUFFIX}"), ns=(i * 10**9, i * 10**9))
    kept = sorted(os.listdir(where))
    assert kept == [f"{i:064x}{gencache.SUFFIX}" for i in range(3, gencache.KEEP + 3)]


# --------------------------------------------------------------------------- reading the systemd release

@pytest.mark.parametrize("line", [
    "7f0c1a000000-7f0c1a100000 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so",
    "7f r-xp 0 0 0 /usr/lib64/systemd/libsystemd-shared-255.13-1.fc40.so",
    "7f r-xp 0 0 0 /usr/lib/systemd/libsystemd-shared-x.so /lib/systemd/libsystemd-shared-257.so",
    "7f r-xp 0 0 0 /usr/lib/libc.so.6",
    "/libsystemd-shared-252/other.so",
    "/libsystemd-shared-.so",
])
def test_the_release_is_read_as_the_pattern_says(line: str) -> None:
    m = re.search(r"/libsystemd-shared-([0-9]+)[^/]*\.so", line)
    assert machine.release_in(line) == (int(m[1]) if m else None)


def test_the_installed_library_is_found_as_glob_finds_it(tmp_path: Path) -> None:
    import glob

    for name in ("x86_64-linux-gnu", "aarch64-linux-gnu", ".hidden"):
        (tmp_path / "usr/lib" / name / "systemd").mkdir(parents=True)
    (tmp_path / "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so").write_text("")
    (tmp_path / "usr/lib/aarch64-linux-gnu/systemd/libsystemd-shared-257.so").write_text("")
    (tmp_path / "usr/lib/.hidden/systemd/libsystemd-shared-999.so").write_text("")
    pattern = f"{tmp_path}/usr/lib/*/systemd/libsystemd-shared-*.so"
    assert machine._expand(pattern) == sorted(glob.glob(pattern))
    assert machine.running_systemd(str(tmp_path / "no-maps"), (pattern,)) == (257, pattern)


# --------------------------------------------------------------------------- a hit that cannot be written

def test_a_hit_through_a_link_out_of_the_output_folder_is_refused_as_a_miss_refuses_it(tmp_path: Path) -> None:
    # A miss refuses a folder of its output that leads elsewhere (compiler/write.check_folder);
    # the hit wrote through it.
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    assert generate(tmp_path, src).returncode == 0 and entries(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "normal"
    argv = [str(out), str(tmp_path / "early"), str(tmp_path / "late")]
    shutil.rmtree(out)
    out.mkdir()
    (out / "jobgen").symlink_to(elsewhere)
    r = subprocess.run([str(GENERATOR), *argv], capture_output=True, text=True, timeout=300,
                       env={"PATH": os.environ["PATH"], "JOBGEN_MANIFEST_DIRS": str(src),
                            "JOBGEN_GENERATOR_CACHE": str(cache_dir(tmp_path))})
    assert (r.returncode, r.stderr) == (1, f"jobgen-generator: cannot write into {out}: cannot write {out}/jobgen: it leads "
                                           "out of the output folder\n")
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["jobgen"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="mounts a tmpfs: needs root and unshare")
def test_a_hit_on_a_full_output_folder_leaves_nothing_as_a_miss_leaves_nothing(tmp_path: Path) -> None:
    # A 16 KiB tmpfs: the hit left a temporary file and the first jobs' units behind.
    src = folder_with(tmp_path, **{"a.yaml": "jobgen: 1\ntarget: {systemd: '252'}\njobs:\n" + "".join(
        f"  job-{i}:\n    command: [/bin/true]\n    schedule: '*:0/5'\n" for i in range(1, 21))})
    assert generate(tmp_path, src).returncode == 0 and entries(tmp_path)
    out = tmp_path / "normal"
    shutil.rmtree(out)
    out.mkdir()
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'mount -t tmpfs -o size=16k jobgen-test "$0" && "$@"; code=$?; ls -A "$0"; exit $code', str(out),
                        str(GENERATOR), str(out), str(tmp_path / "early"), str(tmp_path / "late")],
                       capture_output=True, text=True, timeout=300,
                       env={"PATH": os.environ["PATH"], "JOBGEN_MANIFEST_DIRS": str(src),
                            "JOBGEN_GENERATOR_CACHE": str(cache_dir(tmp_path))})
    assert r.returncode == 1
    assert re.fullmatch(rf"jobgen-generator: cannot write into {out}: cannot write {out}/job-\d+\.\w+: No space left on "
                        r"device\n", r.stderr), r.stderr
    assert r.stdout == ""  # `ls -A` of the output folder: nothing left
