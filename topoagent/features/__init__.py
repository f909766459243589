"""Features built on the core, one package each: ``plan`` (formats), ``vms``, ``draw``,
``fleet``, ``capture``, ``audit`` (the processes using the GPUs), ``act`` (apply, fix, exec,
health: everything that changes the host, over the one writer) and ``daemon``.  Each holds its
own read -> advise -> render -> command; the daemon sits above ``act``, which sits above the
independent others (an import contract).
"""
