"""core.pathclass: one ordered vocabulary, NCCL's order, nvidia-smi's tokens."""

from __future__ import annotations

import typing

import pytest

from topoagent.core.pathclass import PathClass
from topoagent.core.render.json_report import PathEntry


def test_the_order_is_nccls_with_nvidia_smis_node_between_phb_and_sys():
    """NVIDIA/nccl src/include/graph.h numbers PATH_LOC 0, NVL 1, C2C 3, PIX 4, PXB 5, P2C 6,
    PXN 7, PHB 8, SYS 9; nvidia-smi's NODE (inside one NUMA node) is between PHB and SYS."""
    assert sorted(PathClass) == [
        PathClass.X,
        PathClass.NV,
        PathClass.C2C,
        PathClass.PIX,
        PathClass.PXB,
        PathClass.P2C,
        PathClass.PXN,
        PathClass.PHB,
        PathClass.NODE,
        PathClass.SYS,
    ]


@pytest.mark.parametrize(
    "cls, token",
    [
        (PathClass.X, "X"),
        (PathClass.NV, "NV"),
        (PathClass.C2C, "SYS"),  # nvidia-smi prints SYS from a C2C GPU to every NIC
        (PathClass.PIX, "PIX"),
        (PathClass.PXB, "PXB"),
        (PathClass.P2C, "SYS"),
        (PathClass.PXN, "PXN"),  # NCCL's route, never a cell (from_token reads no PXN)
        (PathClass.PHB, "PHB"),
        (PathClass.NODE, "NODE"),
        (PathClass.SYS, "SYS"),
    ],
)
def test_token_is_what_nvidia_smi_prints(cls, token):
    assert cls.token == token


@pytest.mark.parametrize(
    "cell, cls",
    [
        ("X", PathClass.X),
        ("NV18", PathClass.NV),
        ("NV1", PathClass.NV),
        ("PIX", PathClass.PIX),
        ("PXB", PathClass.PXB),
        ("PHB", PathClass.PHB),
        ("NODE", PathClass.NODE),
        ("SYS", PathClass.SYS),
        ("NV", None),  # no link count
        ("NVx", None),
        ("?", None),
        ("P2C", None),  # NCCL's names are no cells
        ("PXN", None),
        ("C2C", None),
        ("sys", None),
        ("", None),
    ],
)
def test_from_token_reads_a_matrix_cell(cell, cls):
    assert PathClass.from_token(cell) is cls


def test_the_scan_contract_names_every_pcie_token():
    """The JSON contract's ``pcie`` literal is the PCIe classes' tokens (no NV, no NCCL-only name)."""
    pcie = typing.get_args(typing.get_type_hints(PathEntry)["pcie"])
    assert set(pcie) == {c.token for c in PathClass if c not in (PathClass.NV, PathClass.PXN)}
