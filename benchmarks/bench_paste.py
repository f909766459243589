"""``scan --paste`` of long reports: what reading a paste of each kind costs as it grows.

    python benchmarks/bench_paste.py [--lines 2000,32000] [--runs 3] [--code DIR]

For each paste kind, copies of a public paste of it (:data:`SAMPLES`, files in
``tests/core/paste_samples``) glued into texts of about ``--lines`` lines, and the median CPU
time (``time.process_time``: a loaded machine's wall clock drifts) of
:func:`topoagent.core.paste.read_pastes` (find, parse, join) on each, in one process that has
imported topoagent.  ``--code`` reads another checkout's package (before/after).  Prints a
Markdown table.  ``tests/core/test_paste_cost.py`` checks the same growth by counting work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PASTES = REPO / "tests/core/paste_samples"
#: Kind -> a public paste of it (tests/core/paste_samples/README.md names each source).
SAMPLES = {
    "nvidia-smi topo -m": "derived_h100_topo_and_p2p_n.txt",
    "nvidia-smi topo -p2p": "topo_m_p2p_details_2x5090.txt",
    "nvidia-smi -q": "nvsmi_q_a10g_p0_x8.txt",
    "nvidia-smi nvlink": "derived_nvlink_s_two_v100.txt",
    "numactl -H": "numactl_nps4_memoryless_nodes.txt",
    "ibdev2netdev": "ibdev2netdev_column_comments.txt",
    "ibv_devinfo": "ibv_devinfo_mlx4_two_ports.txt",
    "rocm-smi --showtopo": "rocm_smi_showtopo_4gpu_pcie.txt",
    "amd-smi topology": "amd_smi_topology_mi300x_8gpu.txt",
    "NCCL topology XML": "../parse/samples/nccl_xml/oci_h100_topology.xml",
    "lstopo": "lstopo_v_p4d_efa_fixture.txt",
    "dmesg (AER)": "dmesg_aer_journal_root_port.txt",
    "lspci -tv": "dmesg_aer_and_lspci_tree_laptop.txt",
    "lspci -vvv": "../parse/samples/lspci/vvv_plx_pex8725_acs.txt",
}


def glued(kind: str, lines: int) -> str:
    """Copies of the kind's sample, at least ``lines`` lines in all."""
    sample = (PASTES / SAMPLES[kind]).read_text()
    return "\n".join([sample] * -(-lines // sample.count("\n")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--lines", default="2000,32000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--code", help="a checkout whose topoagent package to time")
    args = ap.parse_args()
    sys.path.insert(0, args.code or str(REPO))
    from topoagent.core.paste import PasteInput, read_pastes

    sizes = [int(n) for n in args.lines.split(",")]
    print("| kind | " + " | ".join(f"{n} lines, CPU ms" for n in sizes) + " | last / first |")
    print("|---|" + "---|" * len(sizes) + "---|")
    for kind in SAMPLES:
        ms = []
        for n in sizes:
            given = [PasteInput(kind, glued(kind, n))]
            times = []
            for _ in range(args.runs):
                start = time.process_time()
                read_pastes(given)
                times.append((time.process_time() - start) * 1000)
            ms.append(statistics.median(times))
        print(f"| {kind} | " + " | ".join(f"{t:.0f}" for t in ms) + f" | {ms[-1] / ms[0]:.1f} |")


if __name__ == "__main__":
    main()
