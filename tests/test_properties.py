"""Same manifest, same bytes; and `jobgen render` changes only what it must.

Pure properties (hypothesis, no systemd needed) on the pipeline, then the write behaviour
of the real command line, run as a subprocess the way an operator or CI runs it:

- reordering any mapping (top level, jobs, a job's keys, environment, lock, defaults,
  workers) changes no output byte; rendering twice gives the same bytes;
- a second render reports every file `identical` and touches no file (mtime, inode);
- `--check` writes nothing and exits 0 when up to date, 1 when anything would change;
- `--diff` prints a unified diff of each change;
- `--prune` removes only files whose header names the manifest being rendered;
- no timestamp, host name, time zone, locale or manifest path spelling reaches the output;
- `--format json` is JSON listing every file and its action.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from jobgen.compiler import pipeline
from jobgen.compiler.diagnostics import ManifestError
from support.cli import Ran
from support.cli import jobgen as run_jobgen

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))

# Every kind of mapping a manifest has, several keys in each, so reordering has something
# to reorder: defaults, environment in defaults and jobs, each lock scope, both worker kinds.
RICH = """\
jobgen: 1
target: {systemd: ">=252"}
defaults:
  user: shop
  group: shop
  working_directory: /srv/shop
  environment: {APP_ENV: production, LOG_LEVEL: info, TZ: UTC, CACHE: "50%"}
jobs:
  catalog-refresh:
    description: Refresh the catalog (100% of the feed)
    command: [/usr/bin/php, artisan, "catalog:refresh", "--supplier=main"]
    schedule: "*:0/5"
    overlap: skip
    timeout: 4min
    environment: {FEED: main, BATCH: "500", PRICE: "$5"}
    lock: {scope: host, name: catalog}
  invoice-export:
    description: Export invoices
    command: /usr/bin/php artisan invoices:export --date=yesterday
    schedule: "*-*-* 01:30:00"
    timezone: Europe/Berlin
    overlap: wait
    wait_timeout: 10min
    timeout: 30min
    persistent: true
  sales-report:
    command: [/usr/bin/php, artisan, "report:sales"]
    schedule: {every: 15min}
    overlap: allow
    timeout: 10min
  nightly-billing:
    command: [/usr/bin/php, artisan, "billing:charge"]
    schedule: daily
    lock: {scope: cluster, name: billing, backend: "redis://127.0.0.1:6379/0", ttl: 60s}
  warmup:
    command: [/usr/bin/php, artisan, "cache:warm"]
    schedule: {after_boot: 2min}
    lock: {scope: unit}
workers:
  mailer:
    command: [/usr/bin/php, artisan, "queue:work", "--queue=mail"]
    instances: 3
    stop_timeout: 30s
  indexer:
    command: [/usr/bin/php, artisan, "search:index"]
    stop_timeout: 1min
    environment: {SCOUT: "on", BATCH: "100"}
"""

MANIFESTS = {"rich": RICH} | {path.stem: path.read_text() for path in EXAMPLES}


def files_of(text: str, name: str = "manifest.yaml") -> dict[str, bytes]:
    return pipeline.build(f"/srv/manifests/{name}", text=text).files


# --------------------------------------------------------------------------- pure properties


def shuffled(node, rnd: random.Random):
    """The same YAML tree with every mapping's keys in a random order (lists keep theirs:
    argv order means something)."""
    if isinstance(node, dict):
        items = list(node.items())
        rnd.shuffle(items)
        return {key: shuffled(value, rnd) for key, value in items}
    if isinstance(node, list):
        return [shuffled(item, rnd) for item in node]
    return node


@pytest.mark.parametrize("name", MANIFESTS)
@settings(max_examples=25, deadline=None)
@given(rnd=st.randoms(use_true_random=False))
def test_reordering_keys_changes_no_byte(name, rnd):
    tree = yaml.load(MANIFESTS[name], Loader=yaml.BaseLoader)  # strings only, as jobgen reads it
    reordered = yaml.safe_dump(shuffled(tree, rnd), sort_keys=False, allow_unicode=True)
    assert files_of(reordered) == files_of(MANIFESTS[name])


@pytest.mark.parametrize("name", MANIFESTS)
def test_rendering_twice_gives_the_same_bytes(name):
    assert files_of(MANIFESTS[name]) == files_of(MANIFESTS[name])


# --------------------------------------------------------------------------- the real CLI


def jobgen(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Ran:
    """``env``: variables set on top of this process's environment."""
    return run_jobgen(*args, cwd=cwd, env={**os.environ, **(env or {})})


def snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under folder: bytes, mtime in ns, inode (a rewrite changes one of them)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def actions(stdout: str) -> dict[str, str]:
    """`render` text output -> {file name relative to the output folder: action}."""
    found = {}
    for line in stdout.splitlines():
        action, path = line.removeprefix("would ").split(None, 1)  # dry runs say "would update"
        found[path.split("/out/", 1)[1]] = action
    return found


@pytest.fixture
def shop(tmp_path) -> Path:
    """A copy of the shop example the test may edit."""
    path = tmp_path / "shop.yaml"
    shutil.copyfile(REPO / "examples" / "shop.yaml", path)
    return path


SHOP_FILES = {
    "catalog-refresh.service", "catalog-refresh.timer", "invoice-export.service", "invoice-export.timer",
    "sales-report.service", "sales-report.timer", "tmpfiles.d/jobgen-shop.conf",
}


def test_first_render_creates_second_is_identical_and_touches_nothing(shop, tmp_path):
    out = tmp_path / "out"
    first = jobgen("render", str(shop), "-o", str(out))
    assert first.returncode == 0, first.stderr
    assert actions(first.stdout) == {name: "create" for name in SHOP_FILES}
    before = snapshot(out)
    assert set(before) == SHOP_FILES

    second = jobgen("render", str(shop), "-o", str(out))
    assert second.returncode == 0, second.stderr
    assert actions(second.stdout) == {name: "identical" for name in SHOP_FILES}
    assert snapshot(out) == before  # same bytes, same mtime, same inode: nothing rewritten
    assert not [p for p in out.rglob("*") if ".jobgen-tmp" in p.name]  # no temp file left


def test_check_exits_0_when_up_to_date_and_1_on_drift_writing_nothing(shop, tmp_path):
    out = tmp_path / "out"
    assert jobgen("render", str(shop), "-o", str(out)).returncode == 0
    before = snapshot(out)

    clean = jobgen("render", str(shop), "-o", str(out), "--check")
    assert clean.returncode == 0, clean.stderr
    assert set(actions(clean.stdout).values()) == {"identical"}

    shop.write_text(shop.read_text().replace("Refresh the product catalog", "Refresh the catalog"))
    drift = jobgen("render", str(shop), "-o", str(out), "--check")
    assert drift.returncode == 1, drift.stderr
    assert actions(drift.stdout)["catalog-refresh.service"] == "update"
    assert snapshot(out) == before


def test_check_into_a_missing_folder_creates_nothing(shop, tmp_path):
    out = tmp_path / "out"
    result = jobgen("render", str(shop), "-o", str(out), "--check")
    assert result.returncode == 1
    assert set(actions(result.stdout).values()) == {"create"}
    assert not out.exists()


def test_diff_shows_a_unified_diff_of_the_change(shop, tmp_path):
    out = tmp_path / "out"
    assert jobgen("render", str(shop), "-o", str(out)).returncode == 0
    shop.write_text(shop.read_text().replace("Refresh the product catalog", "Refresh the catalog"))

    result = jobgen("render", str(shop), "-o", str(out), "--check", "--diff")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    start = lines.index("--- a/catalog-refresh.service")
    assert lines[start + 1] == "+++ b/catalog-refresh.service"
    assert lines[start + 2].startswith("@@ ")
    hunk = lines[start + 3:]
    assert "-Description=Refresh the product catalog from the supplier feed" in hunk
    assert "+Description=Refresh the catalog from the supplier feed" in hunk
    # The timer's description names the job's description too; nothing else differs.
    changed = [line for line in lines if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
    assert all("Refresh" in line for line in changed), changed
    # --diff without --check is a dry run too (as black's and kubectl's): shown, exit 0, not written
    shown = jobgen("render", str(shop), "-o", str(out), "--diff")
    assert shown.returncode == 0 and "--- a/catalog-refresh.service" in shown.stdout
    assert "would update" in shown.stdout
    assert b"Description=Refresh the product catalog from" in (out / "catalog-refresh.service").read_bytes()


HAND_WRITTEN = "[Unit]\nDescription=Written by hand\n\n[Service]\nExecStart=/bin/true\n"


def test_prune_removes_only_files_generated_from_this_manifest(shop, tmp_path):
    out = tmp_path / "out"
    other = tmp_path / "workers.yaml"
    shutil.copyfile(REPO / "examples" / "workers.yaml", other)
    assert jobgen("render", str(shop), "-o", str(out)).returncode == 0
    assert jobgen("render", str(other), "-o", str(out)).returncode == 0
    (out / "hand.service").write_text(HAND_WRITTEN)
    # A file that mentions jobgen but not in its header line: not jobgen's.
    (out / "notes.service").write_text("# about the files Generated by jobgen from shop.yaml\n" + HAND_WRITTEN)
    from_other = {name for name in snapshot(out) if name.startswith("mailer")}
    assert from_other  # mailer.target, mailer@.service

    # The sales report leaves the manifest.
    text = shop.read_text()
    shop.write_text(text[: text.index("  # A read-only report")])
    before = snapshot(out)

    kept = jobgen("render", str(shop), "-o", str(out))  # without --prune nothing is removed
    assert kept.returncode == 0 and "remove" not in actions(kept.stdout).values()
    assert set(snapshot(out)) == set(before)

    pruned = jobgen("render", str(shop), "-o", str(out), "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert {n: a for n, a in actions(pruned.stdout).items() if a == "remove"} == {
        "sales-report.service": "remove", "sales-report.timer": "remove"}
    after = snapshot(out)
    assert set(after) == set(before) - {"sales-report.service", "sales-report.timer"}
    for name in from_other | {"hand.service", "notes.service"}:
        assert after[name] == before[name]


def test_same_named_manifests_are_refused_together(tmp_path):
    """Generated files name their manifest by file name (so the bytes do not depend on
    where it is checked out); --prune and the tmpfiles.d file rely on it, so two
    manifests with one file name cannot be rendered into one folder (README: Deploying)."""
    out = tmp_path / "out"
    (tmp_path / "team-a").mkdir()
    (tmp_path / "team-b").mkdir()
    a = tmp_path / "team-a" / "jobs.yaml"
    b = tmp_path / "team-b" / "jobs.yaml"
    shutil.copyfile(REPO / "examples" / "shop.yaml", a)
    shutil.copyfile(REPO / "examples" / "hardened.yaml", b)
    result = jobgen("render", str(a), str(b), "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"jobgen: error: {a} and {b} have the same file name; rename one "
        "(generated files name their manifest by file name); nothing written"
    ]
    assert not out.exists()


def test_output_depends_on_nothing_but_the_manifest(shop, tmp_path):
    """Two renders, at least a second apart, in different time zones and locales, one given
    the manifest's absolute path and one a relative path from another folder: same bytes."""
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    started = time.monotonic()
    first = jobgen("render", str(shop), "-o", str(first_out),
                   env={"TZ": "Pacific/Kiritimati", "LANG": "C", "LC_ALL": "C", "PYTHONHASHSEED": "1"})
    assert first.returncode == 0, first.stderr
    time.sleep(max(0.0, 1.1 - (time.monotonic() - started)))  # a clock in seconds would now differ
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = jobgen("render", os.path.relpath(shop, elsewhere), "-o", "../second", cwd=elsewhere,
                    env={"TZ": "America/St_Johns", "LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8",
                         "PYTHONHASHSEED": "2"})
    assert second.returncode == 0, second.stderr
    a = {name: data for name, (data, _, _) in snapshot(first_out).items()}
    b = {name: data for name, (data, _, _) in snapshot(second_out).items()}
    assert a == b and set(a) == SHOP_FILES
    host = socket.gethostname().encode()
    assert not [name for name, data in a.items() if host in data or str(tmp_path).encode() in data]


def test_json_output_lists_every_file_and_action(shop, tmp_path):
    out = tmp_path / "out"
    first = jobgen("render", str(shop), "-o", str(out), "--format", "json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["ok"] is True and doc["changed"] is True and doc["check"] is False
    assert {f["path"]: f["action"] for f in doc["files"]} == {name: "create" for name in SHOP_FILES}

    again = json.loads(jobgen("render", str(shop), "-o", str(out), "--format", "json").stdout)
    assert again["changed"] is False
    assert {f["path"]: f["action"] for f in again["files"]} == {name: "identical" for name in SHOP_FILES}

    shop.write_text(shop.read_text().replace("timeout: 4min", "timeout: 5min"))
    check = jobgen("render", str(shop), "-o", str(out), "--format", "json", "--check", "--diff")
    assert check.returncode == 1
    doc = json.loads(check.stdout)
    assert doc["changed"] is True and doc["check"] is True
    assert {f["path"] for f in doc["files"] if f["action"] == "update"} == {"catalog-refresh.service"}
    assert "-TimeoutStartSec=4min" in doc["diff"] and "+TimeoutStartSec=5min" in doc["diff"]


def test_json_output_of_an_invalid_manifest(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobgen: 1\njobs:\n  x:\n    command: [/usr/bin/php]\n    schedule: daily\n    overlap: sometimes\n")
    out = tmp_path / "out"
    result = jobgen("render", str(bad), "-o", str(out), "--format", "json")
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert [(d["line"], d["severity"]) for d in doc["diagnostics"]] == [(6, "error")]
    assert not out.exists()


# --------------------------------------------------------------------------- any input

# Pieces of YAML and of values that have broken parsers and converters: structure, aliases,
# tags, merge keys, quotes, digits Python's isdigit() accepts, long numbers, escapes,
# specifier and variable starters, control characters.
_PIECES = st.sampled_from([
    "[", "]", "{", "}", ": ", ":", "- ", "\n", "  ", "&a ", "*a", "!!str ", "! ", "<<: ", "~", "'", '"',
    "²", "٣", "9" * 30, "%", "$", "\\", "\\x01", "\x00", "\x07", "\t", "#", ",", "? ", "|", ">", "@",
    "\u2028", "\ud800", "\ufffe", "/", "..", "nobody", "cluster", "instances: ", "lock: ", "0",
])


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_any_edit_of_a_manifest_renders_or_gives_positioned_problems(data):
    """No input gets a traceback: a manifest cut and spliced anywhere with any of _PIECES
    either renders or raises ManifestError with at least one positioned problem."""
    text = RICH
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 12)))
        text = text[:start] + "".join(data.draw(st.lists(_PIECES, min_size=0, max_size=4))) + text[end:]
    try:
        pipeline.build("/srv/manifests/m.yaml", text=text)
    except ManifestError as exc:
        assert exc.diagnostics
        assert all(d.pos.line >= 1 and d.pos.col >= 1 for d in exc.diagnostics)
