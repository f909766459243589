"""``topoagent capture``: record exactly what a scan reads on this host, scrubbed; and replay it.

One module per concern: :mod:`.collect` reads the allow-list through
:class:`~topoagent.hostfs.HostFS` and runs the tools, :mod:`.scrub` replaces identifying values
(pure), :mod:`.archive` packs the entries into a tarball and unpacks an untrusted one for
``--root``.  The public names are re-exported here.
"""

from __future__ import annotations

from topoagent.sources.capture.archive import (
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_TOTAL_BYTES,
    CaptureError,
    entries_to_tar,
    replay_root,
    resolve_root,
    unpack_capture,
)
from topoagent.sources.capture.collect import (
    CAPTURE_FORMAT,
    MANIFEST,
    Capture,
    Entry,
    collect_capture,
)
from topoagent.sources.capture.scrub import Scrubber, scrub_config

__all__ = [
    "CAPTURE_FORMAT",
    "MANIFEST",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "Capture",
    "CaptureError",
    "Entry",
    "Scrubber",
    "collect_capture",
    "entries_to_tar",
    "replay_root",
    "resolve_root",
    "scrub_config",
    "unpack_capture",
]
