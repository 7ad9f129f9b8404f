"""The compiled cache kept across boots (host/genpersist.py): a run that could store its
entry only in the /run folder leaves a mark and a unit pair; `jobgen-generator
--persist-cache INTO FROM` (what the pair's service runs) moves every entry the reader
accepts into the first folder, by gencache's own writer, and says so in one line. A
hostile entry, or a first folder that is full, read-only or unsafe, costs one line and
loses nothing; the exit status is always 0.

Folders stand in for the real ones: tmp_path/var/cache/jobgen/generator (with no
tmp_path/var/cache: /var not mounted yet, or read-only as under systemd 257) and
tmp_path/run/jobgen-generator.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from support.sdanalyze import missing_reason, versioned_analyzer
from test_generator_cache import GENERATOR, SPOILED, folder_with, job, snapshot

from jobgen.cli.exits import EXIT_INVALID
from jobgen.host import gencache, genpersist

KEY = "e" * 64


class Disk:
    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.var = tmp_path / "var"
        self.var.mkdir()
        self.into = self.var / "cache" / "jobgen" / "generator"
        (tmp_path / "run").mkdir()
        self.run_dir = tmp_path / "run" / "jobgen-generator"
        self.env = {"JOBGEN_GENERATOR_CACHE": f"{self.into}:{self.run_dir}"}

    def mount_var(self) -> None:
        (self.var / "cache").mkdir()

    def generate(self, src: Path):
        from test_generator_cache import generate

        return generate(self.tmp, src, env=self.env)

    def persist(self, wrap: str | None = None) -> subprocess.CompletedProcess:
        argv = [str(GENERATOR), "--persist-cache", str(self.into), str(self.run_dir)]
        if wrap is not None:  # a shell script in a mount namespace of its own: "$@" is the run
            argv = ["unshare", "--mount", "/bin/sh", "-c", wrap, "sh", *argv]
        return subprocess.run(argv, capture_output=True, text=True, env={"PATH": os.environ["PATH"]}, timeout=120)

    def kept(self) -> list[str]:
        return sorted(p.name for p in self.into.glob("*")) if self.into.is_dir() else []

    def in_run(self) -> list[str]:
        return sorted(p.name for p in self.run_dir.iterdir()) if self.run_dir.is_dir() else []


def listing(folder: Path) -> dict[str, tuple]:
    """Name -> (mode, bytes of a regular file, target of a link): never opens a FIFO."""
    found = {}
    for p in folder.iterdir():
        st = p.lstat()
        found[p.name] = (st.st_mode, st.st_uid, p.read_bytes() if stat.S_ISREG(st.st_mode) else None,
                         os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
    return found


def line(text: str) -> str:
    return f"jobgen-generator: compiled cache: {text}\n"


# --------------------------------------------------------------------------- the way it works

def test_an_entry_only_run_could_take_is_kept_by_the_persist_run_and_the_next_boot_is_a_hit(tmp_path: Path) -> None:
    disk = Disk(tmp_path)
    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    first = disk.generate(src)
    assert first.compiled and first.stderr == ""
    [entry] = [n for n in disk.in_run() if n.endswith(gencache.SUFFIX)]
    assert disk.in_run() == sorted([entry, gencache.PENDING])
    # The pair is there, the path unit enabled as [Install] WantedBy=paths.target would.
    written = snapshot(first.out)
    assert written["paths.target.wants/jobgen-generator-cache.path"] == ("link", "../jobgen-generator-cache.path")
    service = written["jobgen-generator-cache.service"][2].decode()
    assert f"ExecStart=-{os.path.realpath(GENERATOR)} --persist-cache {disk.into} {disk.run_dir}\n" in service
    assert f"PathExists={disk.run_dir}/pending\n" in written["jobgen-generator-cache.path"][2].decode()

    disk.mount_var()  # local-fs.target: /var is there now
    r = disk.persist()
    assert (r.returncode, r.stdout, r.stderr) == (0, "", line(f"1 entry kept in {disk.into}"))
    assert disk.kept() == [entry] and disk.in_run() == []  # moved, and the mark taken
    assert stat.S_IMODE((disk.into / entry).stat().st_mode) == 0o600
    assert stat.S_IMODE(disk.into.stat().st_mode) == 0o700
    # Nothing left to do: silent.
    again = disk.persist()
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")

    # Reboot: /run is empty again. The generator finds the entry in /var/cache.
    for p in disk.run_dir.iterdir():
        p.unlink()
    disk.run_dir.rmdir()
    hit = disk.generate(src)
    assert (hit.compiled, hit.stderr) == (False, "")
    assert snapshot(hit.out) == written
    assert disk.in_run() == []  # stored nowhere: nothing to keep, no mark


def test_with_one_cache_folder_no_pair_is_generated(tmp_path: Path) -> None:
    from test_generator_cache import generate

    src = folder_with(tmp_path, **{"a.yaml": job("a")})
    written = snapshot(generate(tmp_path, src).out)
    assert not any("jobgen-generator-cache" in name for name in written)


def test_a_job_cannot_take_the_pair_s_name(tmp_path: Path) -> None:
    disk = Disk(tmp_path)
    src = folder_with(tmp_path, **{"a.yaml": job("jobgen-generator-cache")})
    run = disk.generate(src)
    assert "'jobgen-generator-cache'" in run.stderr and "skipped" in run.stderr
    assert b"--persist-cache" in (run.out / genpersist.SERVICE_UNIT).read_bytes()


def test_the_persisted_entry_counts_as_the_newest_for_keep(tmp_path: Path) -> None:
    disk = Disk(tmp_path)
    disk.mount_var()
    for i in range(gencache.KEEP):
        gencache.store(str(disk.into), f"{i:064x}", gencache.Entry({"a.service": b"x"}, {}, []))
        os.utime(disk.into / f"{i:064x}{gencache.SUFFIX}", ns=(i * 10**9, i * 10**9))
    gencache.store(str(disk.run_dir), KEY, gencache.Entry({"b.service": b"y"}, {}, []))
    gencache.mark_pending(str(disk.run_dir))
    r = disk.persist()
    assert r.stderr == line(f"1 entry kept in {disk.into}")
    assert disk.kept() == sorted([f"{i:064x}{gencache.SUFFIX}" for i in range(1, gencache.KEEP)] + [KEY + gencache.SUFFIX])


# --------------------------------------------------------------------------- hostile or failing

@pytest.mark.parametrize("case", SPOILED)
def test_a_spoiled_entry_in_run_is_not_kept_and_is_left_as_it_is(tmp_path: Path, case: str) -> None:
    spoil, why = SPOILED[case]
    disk = Disk(tmp_path)
    disk.generate(folder_with(tmp_path, **{"a.yaml": job("a")}))
    [entry] = disk.run_dir.glob("*" + gencache.SUFFIX)
    spoil(entry)
    before = listing(disk.run_dir)
    disk.mount_var()
    r = disk.persist()
    assert r.returncode == 0 and r.stdout == ""
    [said] = r.stderr.splitlines()
    assert said.startswith(line(f"0 entries kept in {disk.into}; not kept: {entry}").rstrip()) and why in said, said
    assert disk.kept() == []
    after = listing(disk.run_dir)
    assert after == {k: v for k, v in before.items() if k != gencache.PENDING}  # only the mark taken


@pytest.mark.parametrize(("case", "mount", "why"), [
    ("full", "mount -t tmpfs -o size=64k,mode=0755 tmpfs {var}/cache", "No space left on device"),
    ("read-only", "mount -t tmpfs -o ro,mode=0755 tmpfs {var}/cache", "Read-only file system"),
])
def test_a_full_or_read_only_var_cache_is_one_line_and_loses_nothing(tmp_path: Path, case: str, mount: str, why: str) -> None:
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces (root)")
    disk = Disk(tmp_path)
    disk.mount_var()
    big = gencache.Entry({"a.service": os.urandom(96 * 1024).hex().encode()}, {}, [])  # larger than 64k
    gencache.store(str(disk.run_dir), KEY, big)
    gencache.store(str(disk.run_dir), "f" * 64, big)
    gencache.mark_pending(str(disk.run_dir))
    before = {p.name: p.read_bytes() for p in disk.run_dir.glob("*" + gencache.SUFFIX)}
    # In the namespace: /var/cache is the small or read-only file system; what the run
    # leaves there is listed before the namespace (and the mount) goes.
    script = mount.format(var=disk.var) + ' && "$@"; echo "rc=$?"; ls -A ' + str(disk.var / "cache")
    r = disk.persist(wrap=script)
    assert r.stderr == line(f"0 entries kept in {disk.into}; 2 left in {disk.run_dir}: cannot store into {disk.into}: {why}")
    listed = r.stdout.splitlines()
    assert listed[0] == "rc=0"
    # Full: jobgen/generator made, and no temporary file left in it.
    assert listed[1:] == (["jobgen"] if case == "full" else [])
    assert {p.name: p.read_bytes() for p in disk.run_dir.glob("*" + gencache.SUFFIX)} == before  # nothing lost
    assert disk.in_run() == sorted(before)  # the mark taken: the path unit does not start it again


def test_a_full_var_cache_leaves_no_temporary_file(tmp_path: Path) -> None:
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces (root)")
    disk = Disk(tmp_path)
    disk.mount_var()
    gencache.store(str(disk.run_dir), KEY, gencache.Entry({"a.service": os.urandom(96 * 1024).hex().encode()}, {}, []))
    script = f'mount -t tmpfs -o size=64k,mode=0755 tmpfs {disk.var}/cache && "$@" 2>/dev/null; ls -A {disk.into}'
    assert disk.persist(wrap=script).stdout == ""


@pytest.mark.parametrize("case", ["writable by others", "a link"])
def test_an_unsafe_first_folder_is_one_line_and_loses_nothing(tmp_path: Path, case: str) -> None:
    disk = Disk(tmp_path)
    disk.mount_var()
    gencache.store(str(disk.run_dir), KEY, gencache.Entry({"a.service": b"x"}, {}, []))
    if case == "writable by others":
        disk.into.parent.mkdir()
        disk.into.parent.chmod(0o777)
        why = f"{disk.into.parent} can be written by others (mode 0777)"
    else:
        (tmp_path / "elsewhere").mkdir()
        disk.into.parent.symlink_to(tmp_path / "elsewhere")
        why = f"{disk.into.parent} is a symbolic link (to {tmp_path / 'elsewhere'})"
    r = disk.persist()
    assert (r.returncode, r.stderr) == (0, line(f"0 entries kept in {disk.into}; 1 left in {disk.run_dir}: cannot store into {disk.into}: {why}"))
    assert disk.in_run() == [KEY + gencache.SUFFIX]
    assert list((tmp_path / "elsewhere").iterdir() if case == "a link" else []) == []


def test_an_unsafe_run_folder_is_one_line(tmp_path: Path) -> None:
    disk = Disk(tmp_path)
    disk.run_dir.mkdir()
    disk.run_dir.chmod(0o777)
    r = disk.persist()
    assert (r.returncode, r.stderr) == (0, line(f"0 entries kept in {disk.into}; {disk.run_dir}: {disk.run_dir} can be written by others (mode 0777)"))


@pytest.mark.parametrize("args", [["/only/one"], ["relative", "/run/x"]])
def test_a_wrong_persist_command_line_is_a_usage_error(args: list[str]) -> None:
    r = subprocess.run([str(GENERATOR), "--persist-cache", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == EXIT_INVALID
    assert "--persist-cache [INTO FROM...]" in r.stderr


# --------------------------------------------------------------------------- the units, by real systemd

@pytest.mark.parametrize("release", [252, 257])
def test_the_pair_passes_systemd_analyze_verify(tmp_path: Path, release: int) -> None:
    analyzer = versioned_analyzer(release)
    if analyzer is None:
        pytest.skip(missing_reason(release))
    program = "/usr/bin/jobgen-generator"
    pair = genpersist.units(program, gencache.FOLDERS, "jobgen-generator")
    for name, data in pair.files.items():
        (tmp_path / name).write_bytes(data)
    result = analyzer.verify([tmp_path / n for n in genpersist.UNITS], stubs=[program])
    assert (result.rc, result.lines) == (0, [])
    assert f"ExecStart=-{program} --persist-cache\n".encode() in pair.files[genpersist.SERVICE_UNIT]
    assert b"CacheDirectory=jobgen\n" in pair.files[genpersist.SERVICE_UNIT]
    assert pair.links == {"paths.target.wants/jobgen-generator-cache.path": "../jobgen-generator-cache.path"}


def test_no_pair_for_a_path_that_would_need_quoting() -> None:
    assert genpersist.units("/opt/my jobgen/bin/jobgen-generator", gencache.FOLDERS, "jobgen-generator") is None
    assert genpersist.units("/usr/bin/jobgen-generator", ("/var/cache/x%n", "/run/x"), "jobgen-generator") is None
    assert genpersist.units("/usr/bin/jobgen-generator", ("/var/cache/x",), "jobgen-generator") is None


def test_on_the_journal_s_stream_the_line_carries_its_priority(tmp_path: Path) -> None:
    # systemd sets $JOURNAL_STREAM for a service whose stderr is the journal: "<4>" makes
    # the line a warning there (SyslogLevelPrefix=), "<6>" an info line.
    disk = Disk(tmp_path)
    disk.run_dir.mkdir(mode=0o777)
    disk.run_dir.chmod(0o777)
    argv = [str(GENERATOR), "--persist-cache", str(disk.into), str(disk.run_dir)]
    r = subprocess.run(argv, capture_output=True, text=True, env={"PATH": os.environ["PATH"], "JOURNAL_STREAM": "8:1"}, timeout=60)
    assert r.stderr.startswith("<4>jobgen-generator: compiled cache: 0 entries kept"), r.stderr
    disk.run_dir.chmod(0o700)
    disk.mount_var()
    gencache.store(str(disk.run_dir), KEY, gencache.Entry({"a.service": b"x"}, {}, []))
    r = subprocess.run(argv, capture_output=True, text=True, env={"PATH": os.environ["PATH"], "JOURNAL_STREAM": "8:1"}, timeout=60)
    assert r.stderr == "<6>" + line(f"1 entry kept in {disk.into}")
