"""``python -m topoagent`` and the ``topoagent`` console script (:func:`entry`).

Ctrl-C is one line at any moment -- ``topoagent: interrupted`` on stderr, exit 130 -- also while
the command-line interface is still being imported: so that import happens here, under
:func:`~topoagent.core.command.interrupt.deferred`, in a module that imports nothing heavy
first (``import topoagent`` itself loads no module of the API until one is asked for);
:func:`topoagent.cli.main` keeps the boundary from then on.
"""

import sys

from topoagent.core.command.interrupt import EXIT_INTERRUPTED, Interrupted, deferred


def entry() -> None:
    """Run the command line in ``sys.argv``."""
    try:
        with deferred():
            from topoagent.cli import main
    except (Interrupted, KeyboardInterrupt):
        sys.stderr.write("topoagent: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    main()


if __name__ == "__main__":
    entry()
