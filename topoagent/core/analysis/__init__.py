"""Analysis: path classes, rails, links and fingerprints from the topology (pure); the findings
judged from them are :mod:`topoagent.core.findings`."""
