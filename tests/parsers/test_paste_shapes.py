"""Pastes as people paste them, shape by shape: a prefix on every line (a C comment, ``//``,
``#``, a mail quote, a ``|`` gutter) and quoted-printable from a mailing-list archive.  Each
shape of a clean sample must give the same devices and cells as the clean text."""

from __future__ import annotations

import quopri
from pathlib import Path

import pytest

from topoagent.api import read_offline
from topoagent.parsers.paste import clean_paste, decode_text

SAMPLES = Path(__file__).parent / "samples"
CLEAN = {
    "nvidia_smi_topo": SAMPLES / "nvsmi" / "dgx_a100_nv12_12nic_spaces.txt",
    "lspci_tree": SAMPLES / "lspci" / "tree_hgx_h100_tvnn.txt",
    "lspci_verbose": SAMPLES / "lspci" / "vvvnn_a100_numa5.txt",
}


def prefixed(marker: str, opener: str | None = None, closer: str | None = None):
    def shape(text: str) -> str:
        lines = [f"{marker} {line}" if line.strip() else marker for line in text.split("\n")]
        return "\n".join(([opener] if opener else []) + lines + ([closer] if closer else []))
    return shape


def quoted_printable(text: str) -> str:
    return quopri.encodestring(text.encode("utf-8")).decode("ascii")


SHAPES = {
    "c_comment": prefixed(" *", "/*", " */"),
    "slashes": prefixed("//"),
    "hash": prefixed("#"),
    "mail_quote": prefixed(">"),
    "quoted_printable": quoted_printable,
}


def facts(snap):
    """What a paste says: every function and every stated cell (not where each line was)."""
    return snap.pci, snap.given_paths


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
@pytest.mark.parametrize("kind", CLEAN, ids=list(CLEAN))
def test_shape_reads_as_the_clean_text(kind, shape):
    text = decode_text(CLEAN[kind].read_bytes())
    shaped = SHAPES[shape](text)
    assert shaped != text
    clean = read_offline(**{kind: text})
    assert clean.pci, "the clean sample must show devices"
    assert facts(read_offline(**{kind: shaped})) == facts(clean)


def test_gutter_on_a_matrix_reads_as_the_clean_text():
    text = decode_text(CLEAN["nvidia_smi_topo"].read_bytes())
    shaped = prefixed("|")(text)
    assert facts(read_offline(nvidia_smi_topo=shaped)) == facts(read_offline(nvidia_smi_topo=text))


def test_quoted_printable_is_long_enough_to_have_soft_breaks():
    shaped = quoted_printable(decode_text(CLEAN["lspci_verbose"].read_bytes()))
    assert "=\n" in shaped


@pytest.mark.parametrize("text, lines", [
    # a C comment around a matrix: the markers and the comment's ends go
    ("/*\n * GPU0\tX\n * GPU1\tNV4\n */", [(2, "GPU0\tX"), (3, "GPU1\tNV4")]),
    # a markdown table keeps its pipes: the matrix parser reads tables
    ("| GPU0 | X |\n| GPU1 | NV4 |", [(1, "| GPU0 | X |"), (2, "| GPU1 | NV4 |")]),
    # a piece of an lspci tree keeps its columns
    ("|           +-01.0\n|           \\-02.0", [(1, "|           +-01.0"), (2, "|           \\-02.0")]),
    # one prefixed line is no block (a root prompt, a comment)
    ("# GPU0\tX", [(1, "# GPU0\tX")]),
    # a block where one line lacks the prefix keeps every line as pasted
    ("> a b\nc d", [(1, "> a b"), (2, "c d")]),
    # each block is judged on its own
    ("> a b\n> c d\n\ne f\ng h", [(1, "a b"), (2, "c d"), (4, "e f"), (5, "g h")]),
    # quoted-printable: soft breaks joined (first line's number), escapes decoded
    ("00:01.0 Intel Cor=\nporation x=3Dy\nnext", [(1, "00:01.0 Intel Corporation x=y"), (3, "next")]),
    # an escape without any soft break is ordinary text
    ("NCCL_IB_HCA=3D", [(1, "NCCL_IB_HCA=3D")]),
])
def test_clean_paste_shapes(text, lines):
    assert [(ln.number, ln.text) for ln in clean_paste(text).lines] == lines
