"""The hardening profiles (manifest key `hardening`): the directives each one writes.

Its own module, below validate.py (which checks the paths a profile hides) and plan.py
(which writes the profile), so neither imports the other for it. Pure data.
"""

from __future__ import annotations

# Profiles are data: (section, directive, value). A directive the target lacks is left
# out with a note (FALLBACKS), so 'strict' degrades on old systemd instead of warning.
DEFAULT = (
    ("Service", "NoNewPrivileges", "yes"),
    ("Service", "PrivateTmp", "yes"),
    ("Service", "ProtectSystem", "full"),
    ("Service", "ProtectKernelTunables", "yes"),
    ("Service", "ProtectKernelModules", "yes"),
    ("Service", "ProtectKernelLogs", "yes"),
    ("Service", "ProtectControlGroups", "yes"),
    ("Service", "ProtectClock", "yes"),
    ("Service", "ProtectHostname", "yes"),
    ("Service", "RestrictSUIDSGID", "yes"),
    ("Service", "RestrictRealtime", "yes"),
    ("Service", "LockPersonality", "yes"),
    ("Service", "SystemCallArchitectures", "native"),
)
STRICT = DEFAULT + (
    ("Service", "ProtectSystem", "strict"),
    ("Service", "ProtectHome", "yes"),
    ("Service", "PrivateDevices", "yes"),
    ("Service", "PrivateUsers", "yes"),
    ("Service", "PrivateIPC", "yes"),
    ("Service", "ProtectProc", "invisible"),
    ("Service", "ProcSubset", "pid"),
    ("Service", "RestrictNamespaces", "yes"),
    ("Service", "RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
    ("Service", "CapabilityBoundingSet", ""),
    ("Service", "AmbientCapabilities", ""),
    ("Service", "SystemCallFilter", "@system-service"),
    ("Service", "SystemCallFilter", "~@privileged @resources"),
    ("Service", "SystemCallErrorNumber", "EPERM"),
    ("Service", "MemoryDenyWriteExecute", "yes"),
    ("Service", "RemoveIPC", "yes"),
    ("Service", "UMask", "0077"),
    ("Service", "DevicePolicy", "closed"),
    ("Service", "KeyringMode", "private"),
)
HARDENING = {"none": (), "default": DEFAULT, "strict": STRICT}
