"""``python -m topoagent`` and the ``topoagent`` console script (:func:`entry`).

Ctrl-C is one line at any moment -- ``topoagent: interrupted`` on stderr, exit 130 -- also while
the command-line interface is still being imported.  So the interface is imported inside that
boundary, here, in a module that imports nothing else first (``import topoagent`` itself loads
no module of the API until one is asked for); :func:`topoagent.cli.main` keeps the boundary
from then on.
"""

import sys


def entry() -> None:
    """Run the command line in ``sys.argv``."""
    try:
        from topoagent.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("topoagent: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    entry()
