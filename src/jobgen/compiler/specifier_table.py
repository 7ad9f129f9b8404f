"""Which directives expand ``%`` specifiers: a fact per directive, kept beside the directive table.

systemd.unit(5) "SPECIFIERS" says specifiers "may be used in many unit file options"; which
ones is decided by each option's parser function in systemd's unit-file parser table
(src/core/load-fragment-gperf.gperf.in, earlier .gperf.m4). A parser that calls
``unit_full_printf()``, ``unit_path_printf()``, ``unit_name_printf()`` (or ``unit_env_printf``/
``unit_cred_printf``) resolves ``%x`` before it reads the value, so a literal ``%`` there is
written ``%%``; every other parser reads the text as it is, so ``%%`` reaches it literally
(``MemoryMax=50%%`` -> "Invalid memory limit '50%%'", the setting is ignored).

escape.py escapes by this table: ``%`` is doubled only where the directive expands it, and a
specifier jobgen writes on purpose (``%i``, ``%n``) is refused for a directive that does not.

Every directive jobgen can write (plan.EMITTED) has a row (tests/test_directive_table.py).
The rows are checked against real ``systemd-analyze verify`` 247, 252, 257 and 262: a value
``%Z`` (no such specifier) makes an expanding parser say "Failed to resolve ... specifiers"
and any other parser fail on the text itself (tests/test_verify.py). Parser names are those
of v252; the answer is the same in every release jobgen's directive table covers.
"""

from __future__ import annotations

from typing import NamedTuple


class Expansion(NamedTuple):
    section: str
    directive: str
    expands: bool
    parser: str  # the config_parse_* function of src/core/load-fragment-gperf.gperf.in@v252


_YES, _NO = True, False

SPECIFIERS: tuple[Expansion, ...] = (
    # [Unit]
    Expansion("Unit", "Description", _YES, "config_parse_unit_string_printf"),
    Expansion("Unit", "OnFailure", _YES, "config_parse_unit_deps (unit_name_printf)"),
    Expansion("Unit", "OnSuccess", _YES, "config_parse_unit_deps (unit_name_printf)"),
    Expansion("Unit", "PartOf", _YES, "config_parse_unit_deps (unit_name_printf)"),
    Expansion("Unit", "Wants", _YES, "config_parse_unit_deps (unit_name_printf)"),
    Expansion("Unit", "StartLimitIntervalSec", _NO, "config_parse_sec"),
    Expansion("Unit", "StartLimitBurst", _NO, "config_parse_unsigned"),
    # [Service]: what runs, as whom, where
    Expansion("Service", "Type", _NO, "config_parse_service_type"),
    Expansion("Service", "User", _YES, "config_parse_user_group_compat (unit_full_printf)"),
    Expansion("Service", "Group", _YES, "config_parse_user_group_compat (unit_full_printf)"),
    Expansion("Service", "WorkingDirectory", _YES, "config_parse_working_directory (unit_path_printf)"),
    Expansion("Service", "Environment", _YES, "config_parse_environ (unit_env_printf)"),
    Expansion("Service", "EnvironmentFile", _YES, "config_parse_unit_env_file (unit_path_printf)"),
    Expansion("Service", "ExecCondition", _YES, "config_parse_exec (unit_full_printf)"),
    Expansion("Service", "ExecStart", _YES, "config_parse_exec (unit_full_printf)"),
    Expansion("Service", "ExecStopPost", _YES, "config_parse_exec (unit_full_printf)"),
    Expansion("Service", "SuccessExitStatus", _NO, "config_parse_set_status"),
    Expansion("Service", "LoadCredential", _YES, "config_parse_load_credential (unit_cred_printf)"),
    Expansion("Service", "ReadWritePaths", _YES, "config_parse_namespace_path_strv (unit_path_printf)"),
    # [Service]: limits, restarts, stopping
    Expansion("Service", "TimeoutStartSec", _NO, "config_parse_service_timeout"),
    Expansion("Service", "TimeoutStopSec", _NO, "config_parse_sec_fix_0"),
    Expansion("Service", "MemoryMax", _NO, "config_parse_memory_limit"),
    Expansion("Service", "Restart", _NO, "config_parse_service_restart"),
    Expansion("Service", "RestartSec", _NO, "config_parse_sec"),
    Expansion("Service", "RestartSteps", _NO, "config_parse_unsigned"),
    Expansion("Service", "RestartMaxDelaySec", _NO, "config_parse_sec"),
    Expansion("Service", "KillMode", _NO, "config_parse_kill_mode"),
    Expansion("Service", "KillSignal", _NO, "config_parse_signal"),
    Expansion("Service", "RuntimeMaxSec", _NO, "config_parse_sec"),
    Expansion("Service", "WatchdogSec", _NO, "config_parse_sec"),
    # [Service]: sandboxing (the hardening profiles)
    Expansion("Service", "NoNewPrivileges", _NO, "config_parse_bool"),
    Expansion("Service", "PrivateTmp", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectSystem", _NO, "config_parse_protect_system"),
    Expansion("Service", "ProtectKernelTunables", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectKernelModules", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectKernelLogs", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectControlGroups", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectClock", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectHostname", _NO, "config_parse_bool"),
    Expansion("Service", "RestrictSUIDSGID", _NO, "config_parse_bool"),
    Expansion("Service", "RestrictRealtime", _NO, "config_parse_bool"),
    Expansion("Service", "LockPersonality", _NO, "config_parse_bool"),
    Expansion("Service", "SystemCallArchitectures", _NO, "config_parse_syscall_archs"),
    Expansion("Service", "ProtectHome", _NO, "config_parse_protect_home"),
    Expansion("Service", "PrivateDevices", _NO, "config_parse_bool"),
    Expansion("Service", "PrivateUsers", _NO, "config_parse_bool"),
    Expansion("Service", "PrivateIPC", _NO, "config_parse_bool"),
    Expansion("Service", "ProtectProc", _NO, "config_parse_protect_proc"),
    Expansion("Service", "ProcSubset", _NO, "config_parse_proc_subset"),
    Expansion("Service", "RestrictNamespaces", _NO, "config_parse_namespace_flags"),
    Expansion("Service", "RestrictAddressFamilies", _NO, "config_parse_address_families"),
    Expansion("Service", "CapabilityBoundingSet", _NO, "config_parse_capability_set"),
    Expansion("Service", "AmbientCapabilities", _NO, "config_parse_capability_set"),
    Expansion("Service", "SystemCallFilter", _NO, "config_parse_syscall_filter"),
    Expansion("Service", "SystemCallErrorNumber", _NO, "config_parse_syscall_errno"),
    Expansion("Service", "MemoryDenyWriteExecute", _NO, "config_parse_bool"),
    Expansion("Service", "RemoveIPC", _NO, "config_parse_bool"),
    Expansion("Service", "UMask", _NO, "config_parse_mode"),
    Expansion("Service", "DevicePolicy", _NO, "config_parse_device_policy"),
    Expansion("Service", "KeyringMode", _NO, "config_parse_exec_keyring_mode"),
    # [Timer]: config_parse_timer resolves specifiers for every On*= before parsing
    Expansion("Timer", "OnCalendar", _YES, "config_parse_timer (unit_full_printf)"),
    Expansion("Timer", "OnActiveSec", _YES, "config_parse_timer (unit_full_printf)"),
    Expansion("Timer", "OnUnitActiveSec", _YES, "config_parse_timer (unit_full_printf)"),
    Expansion("Timer", "OnUnitInactiveSec", _YES, "config_parse_timer (unit_full_printf)"),
    Expansion("Timer", "OnBootSec", _YES, "config_parse_timer (unit_full_printf)"),
    Expansion("Timer", "Persistent", _NO, "config_parse_bool"),
    Expansion("Timer", "DeferReactivation", _NO, "config_parse_bool"),
    Expansion("Timer", "AccuracySec", _NO, "config_parse_sec"),
    Expansion("Timer", "RandomizedDelaySec", _NO, "config_parse_sec"),
    Expansion("Timer", "FixedRandomDelay", _NO, "config_parse_bool"),
    Expansion("Timer", "RandomizedOffsetSec", _NO, "config_parse_sec"),
    # [Install] is read by `systemctl enable` (src/shared/install.c), not by the unit loader:
    # install_name_printf() resolves specifiers in WantedBy= names. verify does not read it.
    Expansion("Install", "WantedBy", _YES, "src/shared/install.c config_parse_strv + install_name_printf"),
)

EXPANDS: dict[tuple[str, str], bool] = {(row.section, row.directive): row.expands for row in SPECIFIERS}


def expands(section: str, directive: str) -> bool:
    """Whether [section] directive= resolves % specifiers. A directive without a row is a
    bug in jobgen (every emitted directive has one): an error, not a guess."""
    try:
        return EXPANDS[(section, directive)]
    except KeyError:
        raise ValueError(f"[{section}] {directive}= has no row in specifier_table.SPECIFIERS") from None
