"""``topoagent capture``: record exactly what a scan reads on this host, scrubbed.

One module per concern: :mod:`.collect` reads the allow-list through
:class:`~topoagent.core.hostfs.HostFS` and runs the tools, :mod:`.scrub` replaces identifying
values (pure), :mod:`.pack` writes the entries as a deterministic tarball, :mod:`.command` is
the CLI.  Replaying a capture (``--root capture.tar.gz``) is the core's:
:mod:`topoagent.core.read.archive` reads the untrusted tarball into memory.
"""
