"""When a file's change time (ctime) proves that nothing changed since (ENV-6, ENV-7, ENV-13).

The sandbox's walks reuse what they found in a directory while its ctime is
the same: creating, removing or renaming an entry sets the directory's ctime,
and no process can set a ctime back. That holds only once the clock the
filesystem stamps with has moved past the recorded stamp, since two changes
within one step of that clock leave the same stamp.

How long a step is depends on the filesystem. Where it keeps nanoseconds,
Linux stamps with the kernel's coarse clock, one tick (at most 10 ms). Others
keep whole seconds: ext4 with 128-byte inodes (what `mkfs.ext4` makes below
512 MB), ext3, HFS+, many network shares; FAT's step is two seconds. A stamp
that is a whole number of seconds is taken to come from such a filesystem (on
one that keeps nanoseconds this happens once in a billion stamps, and only
costs a listing).
"""

from __future__ import annotations

FINE_NS = 50_000_000  # 50 ms: several ticks of the coarse clock (HZ >= 100), and its lag behind ours
COARSE_NS = 3_000_000_000  # 3 s: two-second steps (FAT) and the lag of a whole-second stamp behind ours
_SECOND_NS = 1_000_000_000


def settling_ns(stamp_ns: int) -> int:
    """How long after `stamp_ns` a later change could still carry the same stamp."""
    return COARSE_NS if stamp_ns % _SECOND_NS == 0 else FINE_NS


def recent(stamp_ns: int, now_ns: int) -> bool:
    """Whether a change stamped `stamp_ns` is too close to `now_ns` (or after it) for the stamp to
    tell a later change apart: what was found then must be looked at again next time."""
    return stamp_ns >= now_ns - settling_ns(stamp_ns)
