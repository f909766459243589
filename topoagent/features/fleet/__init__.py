"""``topoagent fleet`` and ``topoagent baseline``: many hosts of one build, and the odd one out.

:mod:`.tally` groups hosts by hardware class and fingerprint and compares each group with
the expectation (pure, streaming); :mod:`.report` renders the verdict (text, JSON, HTML);
:mod:`.command` and :mod:`.baseline` are the CLI.  What one host is compared by -- slots,
fingerprints, :func:`topoagent.core.findings.expect.compare` -- is the core's, because
``scan --expect`` and the daemon use it too.
"""
