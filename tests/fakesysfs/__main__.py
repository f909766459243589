"""``python -m tests.fakesysfs NAME [OUTDIR]``: print a machine's functions; write its tree.

NAME is a machine in tests/fixtures/machines (or a path to a TOML description).  With OUTDIR,
the tree is written there (OUTDIR must not already hold sys/ or proc/).  ``--all`` lists the
bridges too; ``--list`` lists the machines.
"""

from __future__ import annotations

import argparse
import sys

from .generator import DescriptionError, generate, machine_names, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fakesysfs", description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", help="machine name or TOML path")
    ap.add_argument("outdir", nargs="?", help="write the tree here")
    ap.add_argument("--all", action="store_true", help="list bridges as well as endpoints")
    ap.add_argument("--list", action="store_true", help="list the machine descriptions")
    args = ap.parse_args(argv)
    if args.list or not args.name:
        print("\n".join(machine_names()))
        return 0
    try:
        rows = summary(args.name)
        if args.outdir:
            root = generate(args.name, args.outdir)
            print(f"# wrote {root}")
    except (DescriptionError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cols = ("bdf", "part", "class", "role", "numa_node", "local_cpulist", "link", "names", "parent")
    table = []
    for r in rows:
        if r["role"] in ("root_port", "switch_upstream", "switch_downstream", "pci_bridge") and not args.all:
            continue
        names = ",".join(
            x
            for x in (*r["netdevs"], r["rdma"] or "", r["nvme"] or "", f"vf-of:{r['physfn']}" if r["physfn"] else "")
            if x
        )
        if r["acs_ctl"]:
            names = (names + f" acs={r['acs_ctl']:#x}").strip()
        table.append([str(r[c]) if c != "names" else names for c in cols])
    widths = [max(len(c), *(len(row[i]) for row in table)) if table else len(c) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(widths[i]) for i, c in enumerate(cols)).rstrip())
    for row in table:
        print("  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
