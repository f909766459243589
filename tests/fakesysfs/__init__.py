"""A fake Linux host tree (sysfs and procfs) generated from a readable machine description.

    from tests.fakesysfs import generate, load_machine, MACHINES_DIR
    root = generate("dgx-h100", tmp_path)        # a name, a TOML path, or a dict
    # root/sys/bus/pci/devices/0000:1b:00.0 -> ../../../devices/pci0000:15/.../0000:1b:00.0

The description format is documented in README.md beside this file; the machines live in
tests/fixtures/machines/*.toml.  ``python -m tests.fakesysfs NAME OUTDIR`` writes one tree for a
person to look at and prints what is in it.
"""

from .generator import (
    MACHINES_DIR,
    PARTS_FILE,
    DescriptionError,
    Machine,
    build,
    build_config,
    fmt_cpulist,
    fmt_mask,
    generate,
    load_machine,
    machine_names,
    parse_cpulist,
    parse_tree,
    summary,
)

__all__ = [
    "MACHINES_DIR",
    "PARTS_FILE",
    "DescriptionError",
    "Machine",
    "build",
    "build_config",
    "fmt_cpulist",
    "fmt_mask",
    "generate",
    "load_machine",
    "machine_names",
    "parse_cpulist",
    "parse_tree",
    "summary",
]
