"""The generator's compiled cache across reboots, on real systemd 252 and 257 (one
persistent container each, hosts.py): the first boot with a manifest compiles, and its
entry ends up in /var/cache/jobgen/generator; the next boot of the same disk is a hit.

The first boot with the manifest starts without /var/cache, as a boot whose separate /var
is not mounted yet when generators run (and on 257 the generator runs with all but /run
read-only anyway): the generator can only store into /run/jobgen-generator; the
generated jobgen-generator-cache.path starts jobgen-generator-cache.service after
local-fs.target, which moves the entry into /var/cache (host/genpersist.py).

A hit is recognised by what it leaves: a miss always stores its entry (on 257 into /run,
where the keeper would then run; on 252 renamed over the old one: a new inode), a hit
stores nothing, so after the second boot the entry in /var/cache is the very file of the
first (same inode, same mtime), /run/jobgen-generator holds no entry, and the keeper
never started, while the units are loaded and the timer runs. A manifest edited after
that boot is a miss at daemon-reload, and its entry is kept in /var/cache as well.
"""

from __future__ import annotations

import pytest

from jobgen.host import gencache, genpersist

pytestmark = pytest.mark.e2e

GENERATOR_LINK = "/etc/systemd/system-generators/jobgen-generator"
IDENT = "jobgen-generator"
MANIFEST = """\
jobgen: 1
jobs:
  kept-tick:
    command: [/bin/true]
    schedule: daily
"""
KEPT_LINE = f"{IDENT}: compiled cache: 1 entry kept in {gencache.FOLDER}"


def _entries(c) -> list[str]:
    """Folder, inode, mode, owner and mtime of every cache entry (find -printf)."""
    found = c.run("find", *gencache.FOLDERS, "-name", f"*{gencache.SUFFIX}", "-printf", "%h %i %m %u %T@\n", check=False).stdout
    return sorted(found.splitlines())


def _show(c, unit: str, *props: str) -> dict[str, str]:
    out = c.systemctl("show", unit, *(f"--property={p}" for p in props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_a_boot_after_the_first_is_served_from_the_compiled_cache(host):
    host.boot()
    host.install()
    host.sh(f'mkdir -p {GENERATOR_LINK.rsplit("/", 1)[0]} && ln -sfn "$(command -v jobgen-generator)" {GENERATOR_LINK}')
    host.c.write_file("/etc/jobgen/kept.yaml", MANIFEST)

    # First boot with the manifest: the generator compiles (nothing cached yet), and finds
    # no /var/cache (tmpfiles.d's var.conf makes it again, after local-fs.target).
    host.sh("rm -rf /var/cache")
    c = host.reboot()
    assert _show(c, "kept-tick.timer", "ActiveState")["ActiveState"] == "active"
    [first] = host.wait(lambda: _entries(c), lambda found: len(found) == 1 and found[0].startswith(gencache.FOLDER + " "),
                        f"the entry in {gencache.FOLDER}", timeout=90)
    assert first.split()[2:4] == ["600", "root"], first
    # Stored into /run by the generator, moved by the keeper: one line.
    host.wait(lambda: [e.get("MESSAGE") for e in host.journal(f"SYSLOG_IDENTIFIER={IDENT}", f"_SYSTEMD_UNIT={genpersist.SERVICE_UNIT}")],
              lambda said: said == [KEPT_LINE], "the keeper's one line")
    assert _show(c, genpersist.PATH_UNIT, "ActiveState")["ActiveState"] == "active"

    # Second boot of the same disk: a hit.
    c = host.reboot()
    assert _show(c, "kept-tick.timer", "ActiveState")["ActiveState"] == "active"
    assert _entries(c) == [first]  # not stored again: the same file, read
    assert c.run("ls", "-A", gencache.RUN_FOLDER, check=False).stdout == ""  # no entry, no pending mark
    service = _show(c, genpersist.SERVICE_UNIT, "ExecMainStartTimestampMonotonic", "ActiveState")
    assert service == {"ExecMainStartTimestampMonotonic": "0", "ActiveState": "inactive"}, service
    assert _show(c, genpersist.PATH_UNIT, "ActiveState")["ActiveState"] == "active"  # waiting, for a reload's miss
    assert host.journal(f"SYSLOG_IDENTIFIER={IDENT}") == []
    print(f"\nsystemd {c.release}: boot with a cache hit {c.boot_seconds:.1f} s")

    # An edited manifest at runtime: the reload's miss is kept too (on 257 by the path unit
    # that has waited since the boot; systemd starts no unit a reload generates).
    c.write_file("/etc/jobgen/kept.yaml", MANIFEST.replace("daily", "weekly"))
    c.systemctl("daemon-reload")
    found = host.wait(lambda: _entries(c), lambda found: len(found) == 2 and all(f.startswith(gencache.FOLDER + " ") for f in found),
                      f"the reload's entry in {gencache.FOLDER}", timeout=90)
    assert first in found
    if int(c.release) >= 257:
        host.wait(lambda: [e.get("MESSAGE") for e in host.journal(f"SYSLOG_IDENTIFIER={IDENT}")],
                  lambda said: said == [KEPT_LINE], "the keeper's line")
    assert c.run("ls", "-A", gencache.RUN_FOLDER, check=False).stdout == ""

    # Reloads in a row, each a miss: one start of the keeper each, more than the default
    # start limit allows (5 in 10 s); the path unit keeps waiting and every entry is kept.
    for hours in range(1, 8):
        c.write_file("/etc/jobgen/kept.yaml", MANIFEST.replace("daily", f"{{every: {hours}h}}"))
        c.systemctl("daemon-reload")
    host.wait(lambda: (_entries(c), c.run("ls", "-A", gencache.RUN_FOLDER, check=False).stdout),
              lambda seen: len(seen[0]) == gencache.KEEP and seen[1] == "", f"{gencache.KEEP} entries kept, none left in /run")
    path = _show(c, genpersist.PATH_UNIT, "ActiveState", "Result")
    assert path == {"ActiveState": "active", "Result": "success"}, path
