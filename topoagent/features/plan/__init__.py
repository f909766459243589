"""``topoagent plan``: the per-GPU plan in the shapes launchers and schedulers read.

One module per format (:data:`FORMATS`): :mod:`.text` for people, :mod:`.report` (the JSON
contract), :mod:`.env` (one rank's exports), :mod:`.slurm` (gres.conf), :mod:`.nccl_topo`
(an ``NCCL_TOPO_FILE``), :mod:`.rails` (topograph's rail record), :mod:`.dra` (Kubernetes DRA
attributes); :mod:`.common` what they share, :mod:`.options` how ``plan``, ``exec`` and ``apply``
ask for a plan, :mod:`.command` the CLI.  The plan itself is the core's
(:mod:`topoagent.core.advice.plan`): ``scan --format json`` carries it too.
"""

from __future__ import annotations

from topoagent.core.render import Render, for_people
from topoagent.features.plan import dra, env, nccl_topo, rails, report, slurm, text

__all__ = ["FORMATS"]

#: ``plan --format`` name -> renderer.
FORMATS: dict[str, Render] = {
    "text": for_people(text.render),
    "json": report.render,
    "env": for_people(env.render),
    "slurm": for_people(slurm.render),
    "nccl-topo": nccl_topo.render,
    "rails": rails.render,
    "dra": dra.render,
}
