"""``python -m topoagent.schema``: write the generated JSON Schemas (see :mod:`topoagent.schema`)."""

from topoagent.schema import write


def main() -> None:
    """Write every schema beside the package and print the paths written."""
    for path in write():
        print(path)


if __name__ == "__main__":
    main()
