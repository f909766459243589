"""The core: what every ``topoagent scan`` reaches, layered one way.

``read`` (the host, through the one reader :mod:`~topoagent.core.hostfs`) and ``paste``
(pasted tool output) -> :mod:`~topoagent.core.snapshot` (the facts) ->
:mod:`~topoagent.core.topology` (the model) -> ``analysis`` (paths, rails, links) ->
``findings`` (the catalogue and the checks) -> ``advice`` (the default plan) ->
:mod:`~topoagent.core.result` -> ``render`` (tree, JSON, matrix) and ``command`` (``scan``).
``parse`` holds the pure parsers; ``write`` the one writer's primitives (atomic, link-safe
files) that every feature writes through.
"""
