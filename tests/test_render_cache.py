"""The render cache (README: Render cache): a render with nothing changed does not
compile again, and says exactly what a compiling render says.

Whether a render compiled is observed from outside: `python -X importtime` lists every
module the process imported, and only a compile imports jinja2. Every test has its own
cache folder (conftest.py, JOBGEN_CACHE_DIR).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.cli import jobgen as run_jobgen

ROOT = Path(__file__).resolve().parents[1]
# Two jobs: target 252, so each gets the DeferReactivation= note (a diagnostic to replay).
MANIFEST = """\
jobgen: 1
target: {systemd: '252'}
jobs:
  backup:
    command: [/usr/bin/backup, --all]
    schedule: daily
    lock: host
  report:
    command: [/usr/bin/report]
    schedule: hourly
"""


def jobgen(*args: str, env: dict | None = None) -> SimpleNamespace:
    """jobgen as a user runs it; ``compiled`` tells whether this run compiled (jinja2,
    which only a compile imports, in -X importtime's account on stderr)."""
    r = run_jobgen(*args, env=env, python=("-X", "importtime"))
    lines = r.stderr.splitlines(keepends=True)
    compiled = any(line.startswith("import time:") and line.split("|")[-1].strip() == "jinja2" for line in lines)
    stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return SimpleNamespace(returncode=r.code, stdout=r.stdout, stderr=stderr, compiled=compiled)


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST)
    return path


def render(manifest: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    r = jobgen("render", str(manifest), "-o", str(out), *extra)
    assert r.returncode in (0, 1), r.stderr
    return r


def test_unchanged_render_does_not_compile_and_says_the_same(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = render(manifest, out)
    second = render(manifest, out)
    uncached = render(manifest, out, "--no-cache")
    assert (first.compiled, second.compiled, uncached.compiled) == (True, False, True)
    assert "create    " in first.stdout
    assert (second.stdout, second.stderr) == (uncached.stdout, uncached.stderr)
    assert "note: DeferReactivation= needs systemd >= 257" in second.stderr
    assert sorted(second.stdout.split()[::2]) == ["identical"] * 5


def test_json_answer_is_the_same_from_the_cache(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(manifest, out)
    cached = render(manifest, out, "--format", "json")
    compiled = render(manifest, out, "--format", "json", "--no-cache")
    assert (cached.compiled, compiled.compiled) == (False, True)
    assert json.loads(cached.stdout) == json.loads(compiled.stdout)


@pytest.mark.parametrize(
    "change, expected",
    [
        ("edit", "update    {out}/backup.service"),
        ("remove", "create    {out}/report.timer"),
        ("mask", "masked    {out}/backup.service"),
    ],
)
def test_a_changed_output_folder_is_seen(manifest: Path, tmp_path: Path, change: str, expected: str) -> None:
    out = tmp_path / "out"
    render(manifest, out)
    if change == "edit":
        with open(out / "backup.service", "a") as fh:
            fh.write("# edited by hand\n")
    elif change == "remove":
        (out / "report.timer").unlink()
    else:
        (out / "backup.service").unlink()
        (out / "backup.service").symlink_to("/dev/null")
    again = render(manifest, out)
    assert expected.format(out=out) in again.stdout.splitlines()
    if change != "mask":
        assert again.compiled
        assert "# edited by hand" not in (out / "backup.service").read_text()
    assert render(manifest, out, "--check").returncode == 0


def test_a_changed_manifest_compiles(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(manifest, out)
    manifest.write_text(MANIFEST.replace("--all", "--full"))
    again = render(manifest, out)
    assert again.compiled
    assert f"update    {out}/backup.service" in again.stdout.splitlines()
    assert "--full" in (out / "backup.service").read_text()


@pytest.mark.parametrize("option", [["--systemd", "257"], ["--holder", "/opt/jobgen/bin/jobgen"], ["--layout", "etc"], ["--strict"]])
def test_every_option_that_shapes_the_output_is_in_the_key(manifest: Path, tmp_path: Path, option: list[str]) -> None:
    out = tmp_path / "out"
    render(manifest, out)
    assert render(manifest, out, *option).compiled


def test_prune_still_finds_a_file_that_appeared(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(manifest, out, "--prune")
    stale = out / "gone.service"
    stale.write_text((out / "report.service").read_text())
    again = render(manifest, out, "--prune")
    assert f"remove    {stale}" in again.stdout.splitlines()
    assert not stale.exists()


def test_what_an_interrupted_render_left_is_cleaned_and_reported(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(manifest, out)
    (out / ".jobgen-tmp.deadbeef").write_text("left by a render killed before its commit point")
    again = render(manifest, out)
    assert "removed 1 temporary files of a render killed before its commit point" in again.stderr
    assert not (out / ".jobgen-tmp.deadbeef").exists()


@pytest.mark.parametrize("damage", ["garbage", "group-writable", "other key", "files a list", "nested too deep"])
def test_a_damaged_or_untrusted_entry_is_a_miss_not_an_error(manifest: Path, tmp_path: Path, damage: str) -> None:
    out = tmp_path / "out"
    render(manifest, out)
    (entry,) = (Path(os.environ["JOBGEN_CACHE_DIR"]) / "render").glob("*.json")
    if damage == "garbage":
        entry.write_text("{not json")
    elif damage == "group-writable":
        entry.chmod(0o664)
    elif damage == "files a list":
        doc = json.loads(entry.read_text())
        entry.write_text(json.dumps({**doc, "files": list(doc["files"].items())}))
    elif damage == "nested too deep":
        entry.write_text("[" * 100_000 + "]" * 100_000)
    else:
        doc = json.loads(entry.read_text())
        entry.write_text(json.dumps({**doc, "key": "0" * 64}))
    again = render(manifest, out)
    assert again.returncode == 0 and again.compiled
    assert "Traceback" not in again.stderr


def test_no_cache_neither_reads_nor_writes(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(manifest, out, "--no-cache")
    assert not (Path(os.environ["JOBGEN_CACHE_DIR"]) / "render").exists()


def test_a_cache_folder_that_cannot_be_made_is_no_error(manifest: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {**os.environ, "JOBGEN_CACHE_DIR": str(blocker / "cache")}
    out = tmp_path / "out"
    first = jobgen("render", str(manifest), "-o", str(out), env=env)
    second = jobgen("render", str(manifest), "-o", str(out), env=env)
    assert (first.returncode, second.returncode) == (0, 0), second.stderr
    assert (first.compiled, second.compiled) == (True, True)


def test_a_new_jobgen_is_a_miss(manifest: Path, tmp_path: Path) -> None:
    """The key covers jobgen's code and templates: a copy of jobgen with one template
    changed compiles instead of trusting what the old one produced."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "src", copy / "src")
    shutil.copytree(ROOT / "templates", copy / "templates")
    out = tmp_path / "out"
    render(manifest, out)
    timer = copy / "templates" / "timer.j2"
    timer.write_text(timer.read_text().replace("# {{ unit.comment }}", "# {{ unit.comment }} (changed)"))
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    again = jobgen("render", str(manifest), "-o", str(out), env=env)
    assert again.returncode == 0 and again.compiled, again.stderr
    assert f"update    {out}/backup.timer" in again.stdout.splitlines()


# --------------------------------------------------------------------------- a cache folder someone else controls

NOBODY = 65534  # nobody on Debian


def foreign_cache(tmp_path: Path, how: str) -> tuple[Path, Path, str]:
    """A cache folder as `sudo -E` finds it in another user's HOME, holding ``render`` as a
    link to a root-owned folder of 80 *.json files (more than the cache keeps): returns
    (the JOBGEN_CACHE_DIR, the victim folder, why the note says it is not used)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for n in range(80):
        (victim / f"{n:02}.json").write_text("{}")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    (cache / "render").symlink_to(victim)
    if how == "foreign owner":
        os.chown(cache, NOBODY, NOBODY)
        os.lchown(cache / "render", NOBODY, NOBODY)
        why = f"{cache} belongs to uid {NOBODY}, not to root"
    elif how == "writable by others":
        cache.chmod(0o777)
        why = f"{cache} can be written by others (mode 0777)"
    else:
        why = f"{cache}/render is a symbolic link (to {victim})"
    return cache, victim, why


@pytest.mark.skipif(os.geteuid() != 0, reason="chowns to nobody: runs as root, as the CI does")
@pytest.mark.parametrize("how", ["foreign owner", "writable by others", "own folder, render linked away"])
def test_a_cache_folder_someone_else_controls_is_not_used_and_nothing_of_the_victim_goes(manifest: Path, tmp_path: Path, how: str) -> None:
    cache, victim, why = foreign_cache(tmp_path, how)
    env = {**os.environ, "JOBGEN_CACHE_DIR": str(cache)}
    out = tmp_path / "out"
    runs = [jobgen("render", str(manifest), "-o", str(out), env=env) for _ in range(2)]
    assert sorted(p.name for p in victim.iterdir()) == [f"{n:02}.json" for n in range(80)]
    assert all(p.read_text() == "{}" for p in victim.iterdir())
    for r in runs:
        assert r.returncode == 0 and r.compiled, r.stderr
        assert r.stderr.splitlines().count(f"jobgen: note: render cache not used: {why}; rendering without it") == 1, r.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["render"]
    quiet = jobgen("render", str(manifest), "-o", str(out), "-q", env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="chowns to nobody")
def test_a_home_kept_by_sudo_is_not_used(manifest: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cache/jobgen").mkdir(parents=True)
    for folder in (home, home / ".cache", home / ".cache/jobgen"):
        os.chown(folder, NOBODY, NOBODY)
    env = {k: v for k, v in os.environ.items() if k not in ("JOBGEN_CACHE_DIR", "XDG_CACHE_HOME")}
    r = jobgen("render", str(manifest), "-o", str(tmp_path / "out"), env={**env, "HOME": str(home)})
    assert r.returncode == 0 and r.compiled
    assert r.stderr.splitlines()[0] == f"jobgen: note: render cache not used: {home} belongs to uid {NOBODY}, not to root; rendering without it"
    assert not (home / ".cache/jobgen/render").exists()


def test_the_code_marks_see_an_edit_in_place_and_ignore_bytecode(tmp_path: Path) -> None:
    """The key names jobgen's sources by name, size, mtime and inode (resources._marks):
    an edit that keeps the size is a new mark; a __pycache__ file (written by imports) is none."""
    from jobgen.compiler import resources

    pkg = tmp_path / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "sub" / "t.j2").write_text("x\n")
    (pkg / "notes.txt").write_text("not code\n")

    def marks() -> list[str]:
        found: list[str] = []
        resources._marks(str(pkg), found)
        return found

    before = marks()
    assert [m.split("\0")[0] for m in before] == [str(pkg / "a.py"), str(pkg / "sub" / "t.j2")]
    (pkg / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0" * 10)
    assert marks() == before
    (pkg / "a.py").write_text("A = 2\n")
    os.utime(pkg / "a.py", ns=(1, 1))  # a different mtime, whatever the clock's resolution
    assert marks() != before
