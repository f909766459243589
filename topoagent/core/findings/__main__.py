"""``python -m topoagent.core.findings``: write ``docs/findings.md`` from the catalogue
(:mod:`topoagent.core.findings.doc`) into the checkout this package is in."""

from pathlib import Path

from topoagent.core.findings.doc import page


def main() -> None:
    """Write the page and print its path."""
    path = Path(__file__).resolve().parents[3] / "docs" / "findings.md"
    path.write_text(page())
    print(path)


if __name__ == "__main__":
    main()
