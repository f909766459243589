"""``python -m topoagent`` runs the command-line interface."""

from topoagent.cli import entry

if __name__ == "__main__":
    entry()
