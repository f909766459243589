"""``python -m topoagent`` runs the command-line interface."""

from topoagent.cli import main

if __name__ == "__main__":
    main()
