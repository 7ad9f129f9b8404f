"""Unit names: what systemd accepts, decided here and nowhere else (lock names: the lock
contract, jobgen.contract.locks).

systemd.unit(5): a unit name is at most 255 characters of ``[A-Za-z0-9:_.\\-]`` (plus one
``@`` for templates) followed by the type suffix. jobgen uses the job's name as the
unit name stem, unchanged, so ``systemctl status NAME`` works without a lookup table:
names systemd would need ``systemd-escape`` for are refused with the reason instead of
being mangled into something the operator never wrote.
"""

from __future__ import annotations

import re

from jobgen.compiler import limits

JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
# A unit another unit points at (OnFailure=, OnSuccess=). The instance may use the
# specifiers for "this unit" (systemd.unit(5)): alert@%n.service is the common idiom.
UNIT_REF = re.compile(r"[A-Za-z0-9_.:\\-]+(@([A-Za-z0-9_.:\\-]|%[nNpPiI])*)?\.(service|target|socket|timer|path|mount)")
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]*\$?|[0-9]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNIT_SUFFIXES = (".service", ".timer", ".target", ".socket", ".path", ".mount")

# Host lock files and overrun stamps. Under /run (root-only, 0755), not /run/lock: /run/lock is
# world-writable (1777), so before the first `systemd-tmpfiles --create` any local user could
# make /run/lock/jobgen/ and JOB.lock and hold flock(2) on it, and every run of the job would
# be skipped (exit 75, logged as success). Nobody but root can create anything in /run.
LOCK_DIR = "/run/jobgen"


def job_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a unit name stem, or None. The caller shows the name."""
    if not name:
        return "a name cannot be empty"
    if not JOB_NAME.fullmatch(name):
        bad = next((c for c in name if not re.fullmatch(r"[A-Za-z0-9_.:-]", c)), name[0])
        shown = "a space" if bad == " " else f"'{bad}'" if bad.isprintable() else f"U+{ord(bad):04X}"
        first = " at the start" if bad == name[0] and re.fullmatch(r"[.:-]", bad) else ""
        return (
            f"not a valid unit name: {shown}{first} is not allowed; use letters, digits and '_.:-', "
            "starting with a letter, digit or '_' (systemd.unit(5))"
        )
    if name.endswith(_UNIT_SUFFIXES):
        stem, _, suffix = name.rpartition(".")
        return f"ends with the unit type '.{suffix}'; jobgen adds the suffix itself, so name it '{stem}'"
    if len(name) > limits.NAME:
        return (
            f"the name has {len(name)} characters; jobgen allows at most {limits.NAME}, so that every file it derives "
            f"from the name (NAME-drain.service, NAME.lock, ...) "
            f"fits in {limits.NAME_MAX} bytes (README: Limits)"
        )
    if shadowed := system_unit(name):
        return (
            f"'{name}' is taken by a system unit ({shadowed}): the units jobgen writes would take its "
            f"place or be mistaken for it; give it a name of its own, e.g. with a prefix ('app-{name}')"
        )
    return None


def lock_file(name: str) -> str:
    return f"{LOCK_DIR}/{name}.lock"


# --------------------------------------------------------------------------- system units
# Names a job or worker cannot take, because a unit jobgen writes from it would shadow a
# unit the host already has, or be mistaken for it: a worker 'timers' with instances
# renders timers.target, which every timer is ordered against; a job 'ssh' renders
# ssh.service and replaces OpenSSH's (a file in /etc/systemd/system wins over
# /lib/systemd/system). Refused by stem (the name before '@' and the type), whatever
# type jobgen would write: `systemctl status ssh` must not be ambiguous either.
# Sources, as unit name -> where it comes from:
_SPECIAL = "systemd.special(7)"
_SYSTEMD = "shipped by systemd"
_DEBIAN = "Debian package {}"
SYSTEM_UNITS: dict[str, str] = {
    # systemd.special(7), systemd 252 and 257.
    **dict.fromkeys((
        "app.slice", "background.slice", "basic.target", "blockdev@.target", "bluetooth.target",
        "boot-complete.target", "cryptsetup-pre.target", "cryptsetup.target", "ctrl-alt-del.target",
        "dbus.service", "dbus.socket", "default.target", "display-manager.service", "emergency.target",
        "exit.target", "factory-reset.target", "final.target", "first-boot-complete.target",
        "getty-pre.target", "getty.target", "graphical-session-pre.target", "graphical-session.target",
        "graphical.target", "halt.target", "hibernate.target", "hybrid-sleep.target", "init.scope",
        "initrd-fs.target", "initrd-root-device.target", "initrd-root-fs.target", "initrd-usr-fs.target",
        "initrd.target", "integritysetup-pre.target", "integritysetup.target", "kbrequest.target",
        "kexec.target", "local-fs-pre.target", "local-fs.target", "machine.slice", "machines.target",
        "multi-user.target", "network-online.target", "network-pre.target", "network.target",
        "nss-lookup.target", "nss-user-lookup.target", "paths.target", "poweroff.target", "printer.target",
        "reboot.target", "remote-cryptsetup.target", "remote-fs-pre.target", "remote-fs.target",
        "remote-veritysetup.target", "rescue.target", "rpcbind.target", "runlevel2.target",
        "runlevel3.target", "runlevel4.target", "runlevel5.target", "session.slice", "shutdown.target",
        "sigpwr.target", "sleep.target", "slices.target", "smartcard.target", "sockets.target",
        "sound.target", "suspend-then-hibernate.target", "suspend.target", "swap.target", "sysinit.target",
        "syslog.socket", "system-update-cleanup.service", "system-update-pre.target",
        "system-update.target", "system.slice", "time-set.target", "time-sync.target", "timers.target",
        "umount.target", "usb-gadget.target", "user.slice", "veritysetup-pre.target", "veritysetup.target",
        "xdg-desktop-autostart.target",
    ), _SPECIAL),
    # Units Debian's systemd packages 247, 252, 257 and 262 ship in /lib/systemd/system
    # whose names do not start with 'systemd-' (those are all refused, below).
    **dict.fromkeys((
        "autovt@.service", "breakpoint-pre-basic.target", "breakpoint-pre-mount.target",
        "breakpoint-pre-switch-root.target", "breakpoint-pre-udev.target", "capsule@.service",
        "console-getty.service", "container-getty@.service", "cryptdisks.service", "cryptdisks-early.service",
        "debug-shell.service", "dev-hugepages.mount", "dev-mqueue.mount", "factory-reset-now.target",
        "getty-static.service", "getty@.service", "hwclock.service", "imports.target", "imports-pre.target",
        "initrd-cleanup.service", "initrd-parse-etc.service", "initrd-switch-root.service",
        "initrd-switch-root.target", "initrd-udevadm-cleanup-db.service", "kmod.service",
        "kmod-static-nodes.service", "ldconfig.service", "modprobe@.service", "proc-sys-fs-binfmt_misc.mount",
        "procps.service", "quotaon.service", "quotaon-root.service", "rc-local.service", "rc.service",
        "rcS.service", "run-lock.mount", "runlevel0.target", "runlevel1.target", "runlevel6.target", "serial-getty@.service",
        "soft-reboot.target", "ssh-access.target", "storage-target-mode.target", "sys-fs-fuse-connections.mount",
        "sys-kernel-config.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount", "system-install.target",
        "tmp.mount", "tpm2.target", "user-runtime-dir@.service", "user@.service", "x11-common.service",
    ), _SYSTEMD),
    # Units jobgen-generator writes beside the manifests' units (host/generator.py).
    **dict.fromkeys(("jobgen-locks.service", "jobgen-generator-report.service", "jobgen-generator-cache.path",
                     "jobgen-generator-cache.service"), "written by jobgen-generator"),
    # Units of Debian packages found on servers (Debian 12 and 13), and of the minimal
    # system itself (apt, dpkg, e2fsprogs, util-linux, man-db, logrotate, cron).
    **{u: _DEBIAN.format(pkg) for pkg, units in (
        ("apt", ("apt-daily.service", "apt-daily-upgrade.service")),
        ("dpkg", ("dpkg-db-backup.service",)),
        ("libpam-modules", ("pam_namespace.service",)),
        ("e2fsprogs", ("e2scrub@.service", "e2scrub_all.service", "e2scrub_fail@.service", "e2scrub_reap.service")),
        ("util-linux", ("fstrim.service", "uuidd.service")),
        ("man-db", ("man-db.service",)),
        ("logrotate", ("logrotate.service",)),
        ("cron", ("cron.service",)),
        ("anacron", ("anacron.service",)),
        ("at", ("atd.service",)),
        ("rsyslog", ("rsyslog.service", "syslog.service")),
        ("openssh-server", ("ssh.service", "ssh.socket", "ssh@.service", "sshd.service", "sshd@.service")),
        ("ifupdown", ("networking.service", "ifup@.service")),
        ("isc-dhcp-client", ("dhclient.service",)),
        ("network-manager", ("NetworkManager.service", "NetworkManager-wait-online.service",
                             "NetworkManager-dispatcher.service")),
        ("wpasupplicant", ("wpa_supplicant.service",)),
        ("unattended-upgrades", ("unattended-upgrades.service",)),
        ("nginx", ("nginx.service",)),
        ("apache2", ("apache2.service", "apache2@.service", "apache-htcacheclean.service")),
        ("lighttpd", ("lighttpd.service",)),
        ("haproxy", ("haproxy.service",)),
        ("varnish", ("varnish.service", "varnishncsa.service")),
        ("squid", ("squid.service",)),
        ("caddy", ("caddy.service",)),
        ("php-fpm", ("php-fpm.service", "php7.4-fpm.service", "php8.2-fpm.service", "php8.4-fpm.service")),
        ("postgresql", ("postgresql.service", "postgresql@.service")),
        ("mariadb-server", ("mariadb.service", "mariadb@.service", "mysql.service", "mysqld.service")),
        ("redis-server", ("redis-server.service", "redis-server@.service", "redis.service",
                          "redis-sentinel.service")),
        ("memcached", ("memcached.service",)),
        ("rabbitmq-server", ("rabbitmq-server.service",)),
        ("exim4", ("exim4.service",)),
        ("postfix", ("postfix.service", "postfix@.service")),
        ("dovecot", ("dovecot.service",)),
        ("opendkim", ("opendkim.service",)),
        ("bind9", ("named.service", "bind9.service")),
        ("unbound", ("unbound.service",)),
        ("dnsmasq", ("dnsmasq.service",)),
        ("chrony", ("chrony.service", "chronyd.service")),
        ("ntpsec", ("ntpsec.service", "ntp.service")),
        ("nftables", ("nftables.service",)),
        ("netfilter-persistent", ("netfilter-persistent.service",)),
        ("ufw", ("ufw.service",)),
        ("fail2ban", ("fail2ban.service",)),
        ("apparmor", ("apparmor.service",)),
        ("auditd", ("auditd.service",)),
        ("smartmontools", ("smartmontools.service", "smartd.service")),
        ("sysstat", ("sysstat.service",)),
        ("lvm2", ("lvm2-monitor.service", "lvm2-lvmpolld.service")),
        ("mdadm", ("mdmonitor.service", "mdadm.service")),
        ("rsync", ("rsync.service",)),
        ("nfs-kernel-server", ("nfs-server.service", "nfs-kernel-server.service", "nfs-mountd.service")),
        ("rpcbind", ("rpcbind.service", "rpcbind.socket")),
        ("samba", ("smbd.service", "nmbd.service", "samba-ad-dc.service", "samba.service")),
        ("winbind", ("winbind.service",)),
        ("cups", ("cups.service",)),
        ("avahi-daemon", ("avahi-daemon.service",)),
        ("polkitd", ("polkit.service",)),
        ("docker.io", ("docker.service", "docker.socket")),
        ("containerd", ("containerd.service",)),
        ("podman", ("podman.service", "podman-auto-update.service")),
        ("libvirt-daemon-system", ("libvirtd.service", "virtlogd.service")),
        ("qemu-guest-agent", ("qemu-guest-agent.service",)),
        ("open-vm-tools", ("open-vm-tools.service",)),
        ("cloud-init", ("cloud-init.service", "cloud-init-local.service", "cloud-config.service",
                        "cloud-final.service")),
        ("openvpn", ("openvpn.service", "openvpn@.service", "openvpn-server@.service", "openvpn-client@.service")),
        ("wireguard-tools", ("wg-quick@.service",)),
        ("keepalived", ("keepalived.service",)),
        ("slapd", ("slapd.service",)),
        ("supervisor", ("supervisor.service",)),
        ("monit", ("monit.service",)),
        ("prometheus", ("prometheus.service",)),
        ("prometheus-node-exporter", ("prometheus-node-exporter.service",)),
        ("zabbix-agent", ("zabbix-agent.service",)),
        ("munin-node", ("munin-node.service",)),
        ("tomcat10", ("tomcat10.service",)),
        ("console-setup", ("console-setup.service", "keyboard-setup.service")),
    ) for u in units},
}
# Every unit systemd itself ships whose name starts with these (systemd-journald,
# systemd-tmpfiles-clean, ...; each release adds some): refused as a family.
SYSTEM_PREFIXES: dict[str, str] = {"systemd-": _SYSTEMD, "dbus-org.freedesktop.": _SYSTEMD}


def _stem(unit: str) -> str:
    return unit.rpartition(".")[0].partition("@")[0]


_SYSTEM_STEMS: dict[str, tuple[str, str]] = {}
for _unit, _source in SYSTEM_UNITS.items():
    _SYSTEM_STEMS.setdefault(_stem(_unit), (_unit, _source))


def system_unit(name: str) -> str | None:
    """The system unit ``name`` would shadow and where it comes from, or None."""
    if found := _SYSTEM_STEMS.get(name):
        return f"{found[0]}, {found[1]}"
    for prefix, source in SYSTEM_PREFIXES.items():
        if name.startswith(prefix):
            return f"{prefix}*, {source}"
    return None


def stamp_file(job: str) -> str:
    """Where the end time of the job's last run is kept (the overrun emulation's stamp)."""
    return f"{LOCK_DIR}/{job}.ended"


# A lock path reaches flock(1)'s argv in a unit file and the path field of a tmpfiles.d line:
# both are escaped (escape.py), but a path the two would read differently is refused.
_PATH_RULES = (
    (lambda p: not p.startswith("/"), "must be an absolute path"),
    (lambda p: "%" in p, "must not contain '%': systemd-tmpfiles would expand it as a specifier (tmpfiles.d(5)) and flock(1) would not, so the job would lock another file than the one created; write the path literally"),
    (lambda p: any(ord(c) < 0x20 or c == "\x7f" for c in p), "must not contain control characters"),
    (lambda p: any(c in ("", ".", "..") for c in p.split("/")[1:]), "must be normalized: no '.' or '..' component, no '//' and no trailing '/' (tmpfiles.d(5) refuses them)"),
)


def lock_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a host lock file, or None. The caller shows the path."""
    for broken, why in _PATH_RULES:
        if broken(path):
            return why
    return None
