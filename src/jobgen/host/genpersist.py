"""Keeping the generator's compiled cache across boots (host/gencache.py) when the
generator itself cannot write /var/cache.

systemd 257 runs generators with everything but /run read-only (src/core/manager.c
manager_execute_generators(), remount_ro), and at boot on any release /var may be a file
system not mounted yet (generators run before local-fs.target, systemd.generator(7)). The
generator then stores its entry in /run/jobgen-generator, a tmpfs emptied at every boot,
and every boot would compile again.

So whenever the cache has a folder after the first (by default /run/jobgen-generator after
/var/cache/jobgen/generator) the generator also writes a unit pair into its output folder,
on a hit as on a miss (three small files; standard library only):

- jobgen-generator-cache.path, linked into paths.target.wants (reached at every boot),
  waits for gencache.PENDING in each later folder, the file a run leaves beside an entry
  it could store only there (gencache.mark_pending). Not PathExistsGlob=*.entry: an
  entry that cannot be kept (a full or read-only /var/cache) stays where it is, still
  used by this boot's reloads, and a path that keeps existing starts its service again
  and again until the start limit fails the path unit. The marker is removed first by
  the run it starts, so one stored entry is one start. Being there from the boot on, the
  path unit also catches what a daemon-reload later stores (systemd starts no newly
  generated unit at a reload, but a path unit already waiting keeps waiting).
- jobgen-generator-cache.service, a sandboxed oneshot after local-fs.target (and the
  mount of /var/cache: RequiresMountsFor=) that runs this same program, by the real path
  the generator runs from, as `jobgen-generator --persist-cache`: each entry of the later
  folders that gencache.lookup() accepts (name, key and digest agree, root's, not
  writable by others, no link, every folder on the way safe) is stored into the first by
  gencache.put() (temporary name, fsync, rename, the KEEP newest) and then removed from
  /run. Whatever happens it writes one line to the journal and exits 0 (the `-` of
  ExecStart= too): keeping a cache never fails a boot.

A path that would need quoting in a unit file (outside _PLAIN) gets no pair: the cache
then works as before, and such a run is only not kept across boots.
"""

from __future__ import annotations

import os

from jobgen.compiler.trust import Untrusted
from jobgen.host import gencache

PATH_UNIT = "jobgen-generator-cache.path"
SERVICE_UNIT = "jobgen-generator-cache.service"
UNITS = (PATH_UNIT, SERVICE_UNIT)
OPTION = "--persist-cache"
WANTED_BY = "paths.target"  # what [Install] WantedBy= of a path unit names; basic.target wants it
# Written into unit files as they are: no quoting, specifier ('%') or variable ('$') there.
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@+=:,./-")
# The first folder as systemd's CacheDirectory= makes it (systemd.exec(5), 235+): created
# root's 0755 before the service starts, and writable under ProtectSystem=strict.
CACHE_ROOT = "/var/cache"


def units(program: str, folders: tuple[str, ...], ident: str) -> gencache.Entry | None:
    """The pair (files and link, as an entry gencache.write() writes), or None when there is
    nothing to keep (one folder) or a path cannot be written plainly into a unit."""
    from jobgen.compiler.header import GENERATOR

    if len(folders) < 2 or not os.path.isabs(program) or not all(_plain(p) for p in (program, *folders)):
        return None
    into, later = folders[0], folders[1:]
    args = "" if folders == gencache.FOLDERS else " " + " ".join(folders)
    parent = os.path.dirname(into)
    writable = [f"ReadWritePaths=-{f}" for f in later]
    if os.path.dirname(parent) == CACHE_ROOT:
        writable.append(f"CacheDirectory={os.path.basename(parent)}")
    else:
        writable.append(f"ReadWritePaths=-{into}")
    path = [
        f"{GENERATOR}: starts {SERVICE_UNIT} when a run of the generator could keep its",
        f"# compiled cache entry only in {', '.join(later)} (see {gencache.PENDING} there).",
        "[Unit]",
        "Description=jobgen-generator's compiled cache, to keep across boots",
        "Documentation=man:jobgen-generator(8)",
        "",
        "[Path]",
        *(f"PathExists={f}/{gencache.PENDING}" for f in later),
        f"Unit={SERVICE_UNIT}",
    ]
    service = [
        f"{GENERATOR}: moves the generator's compiled cache entries from {', '.join(later)}",
        f"# into {into}, so that the next boot finds them.",
        "[Unit]",
        "Description=Keep jobgen-generator's compiled cache across boots",
        "Documentation=man:jobgen-generator(8)",
        # The first folder's file system must be there (a separate /var mounts by then).
        "After=local-fs.target",
        f"RequiresMountsFor={into}",
        # One start per stored entry (the mark is taken first), so reloads in a row may start
        # it more often than the default start limit (5 in 10 s, systemd-system.conf(5)),
        # which would fail the path unit. Were the mark never taken (the program gone), the
        # path unit's own trigger limit (TriggerLimitBurst=, 250+) stops it.
        "StartLimitIntervalSec=0",
        "",
        "[Service]",
        "Type=oneshot",
        # '-': keeping a cache never fails a unit; the program says what went wrong, in one line.
        f"ExecStart=-{program} {OPTION}{args}",
        f"SyslogIdentifier={ident}",
        # It reads and writes the cache folders, nothing else (systemd.exec(5); all 252+).
        "ProtectSystem=strict",
        *writable,
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "PrivateNetwork=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "RestrictAddressFamilies=AF_UNIX",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectControlGroups=yes",
        "RestrictNamespaces=yes",
        "LockPersonality=yes",
        "RestrictRealtime=yes",
    ]
    files = {PATH_UNIT: ("\n".join(path) + "\n").encode(), SERVICE_UNIT: ("\n".join(service) + "\n").encode()}
    return gencache.Entry(files, {f"{WANTED_BY}.wants/{PATH_UNIT}": f"../{PATH_UNIT}"}, [])


def _plain(path: str) -> bool:
    return bool(path) and all(c in _PLAIN for c in path)


def persist(into: str, later: tuple[str, ...]) -> tuple[str, str] | None:
    """Move every entry of the `later` folders that lookup() accepts into `into`; the one
    line to log (severity, text without the program's name), or None when there was nothing to do. An entry is
    removed from where it was only once stored; one refused is left as it is (the
    generator's next miss writes a good one over it)."""
    kept, problems = 0, []
    for where in later:
        try:
            dir_fd = gencache.open_folder(where, create=False)
        except FileNotFoundError:
            continue
        except (OSError, Untrusted) as exc:
            problems.append(f"{where}: {_reason(exc)}")
            continue
        try:
            gencache.take_pending(dir_fd)
            wanted = gencache.keys(dir_fd)
            for n, key in enumerate(wanted):
                try:
                    entry = gencache.lookup(where, key)
                except Untrusted as exc:
                    problems.append(f"not kept: {exc}")
                    continue
                if entry is None:
                    continue  # gone since (a run replaced or trimmed it)
                try:
                    gencache.put(into, key, entry)
                except (OSError, Untrusted) as exc:
                    # The first folder cannot take it (full, read-only, unsafe): the rest
                    # would fail alike. They stay, still used by this boot's reloads.
                    problems.append(f"{len(wanted) - n} left in {where}: cannot store into {into}: {_reason(exc)}")
                    break
                kept += 1
                try:
                    os.unlink(key + gencache.SUFFIX, dir_fd=dir_fd)
                except OSError:
                    pass  # kept twice: /run is emptied at the next boot anyway
        except OSError as exc:
            problems.append(f"{where}: {_reason(exc)}")
        finally:
            os.close(dir_fd)
    if not kept and not problems:
        return None
    done = f"compiled cache: {kept} entr{'y' if kept == 1 else 'ies'} kept in {into}"
    if not problems:
        return "info", done
    return "warning", f"{done}; " + "; ".join(problems)


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
