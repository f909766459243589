"""``topoagent daemon``: the agent as a service.

A loop at the edge of the one orchestration (:func:`topoagent.core.api.run`): it scans at start,
on a timer, on udev hotplug events and on SIGHUP; diffs each result with the last good one
(:func:`topoagent.features.daemon.changes.diff`, pure) and logs the changes as events; and hands the result to
the exporters: ``state.json``, Prometheus ``/metrics`` (and a textfile-collector file) and a
node-feature-discovery feature file.  It never decides anything the CLI would decide
differently.

Modules, each owning one thing: :mod:`.config` (TOML + flags), :mod:`.loop` (the loop),
:mod:`.notify` (sd_notify), :mod:`.http` (the read-only HTTP server), :mod:`.metrics`
(the Prometheus collector), :mod:`.exports` (atomic files), :mod:`.linkwatch` (links judged
over time), :mod:`.udev` (hotplug events), :mod:`.log` (structured events), :mod:`.lock`
(one instance per state directory).  prometheus_client, structlog, pyudev, psutil and pynvml
are imported inside functions, so importing this package costs nothing.
"""
