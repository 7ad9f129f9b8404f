"""sha256, sha1 and BLAKE2b from the interpreter's own modules (_sha256/_sha2, _sha1, _blake2).

`import hashlib` loads OpenSSL's libcrypto first (_hashlib): 4 ms on an idle machine,
up to 30 under load, paid by every generator run at boot and by every `jobgen lock` in
front of a cluster-locked job, for digests of a few hundred bytes where OpenSSL's speed
buys nothing. The digests are the same bytes either way (FIPS 180-4).
"""

from __future__ import annotations

try:
    from _sha256 import sha256  # CPython 3.11
except ImportError:
    try:
        from _sha2 import sha256  # CPython 3.12+
    except ImportError:  # another interpreter
        from hashlib import sha256

try:
    from _sha1 import sha1
except ImportError:
    from hashlib import sha1

# The render cache's per-file digest (compiler/cache.py): RFC 7693, 2.4 times as fast as
# the interpreter's sha256 over the files of 1,000 jobs (3.3 against 8.1 ms here), and
# paid twice per file, when a render records them and when the next one checks them.
try:
    from _blake2 import blake2b
except ImportError:
    from hashlib import blake2b

__all__ = ["blake2b", "sha1", "sha256"]
