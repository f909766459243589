"""Every ``topoagent ...`` command line shown in README.md and docs/*.md runs as shown.

The lines are read from the fenced code blocks (a ``$ `` or ``sudo `` prefix, a trailing
``# comment``, and what follows a pipe or a redirection are dropped; ``\\`` continuations are
joined).  Each must be a key of :data:`CASES`, which says how it runs here -- so a new line in a
doc forces a decision, and a line that left the docs must leave the table too.  Each runs as a
process (``python -m topoagent``) and fails the test on a traceback or an exit status the case
does not allow.

How a doc line becomes a runnable one, the same for every line:

* a command that reads a host gets ``--root FIXTURE`` (the ``dgx-h100`` fixture, generated once,
  with the libvirt definitions of tests/fixtures/libvirt/qemu under ``etc/libvirt/qemu``) unless
  it names a root or pasted input itself; commands that change things get ``--state-dir TMP``;
* placeholders become real samples (:data:`SAMPLES`): ``topo.txt``, ``tree.txt``, ``vvv.txt``
  (tests/core/parse/samples), ``pci.txt`` and the ``.vmx`` files (tests/vms_samples), a capture
  (``host.tar.gz``, ``capture.tar.gz``, ``/path/to/capture``: one made in this test from the
  small ``cloud-vm`` fixture; ``dir``: it unpacked), ``DOMAIN`` (a shut-off domain of
  libvirt's test driver), ``/copy`` (the fixture, with its libvirt files), ``4242`` (a
  ``sleep`` this test starts), ``dgx.json``/``dgx-h100.json`` (a baseline of the fixture),
  ``states/``/``hosts/``/``/srv/topoagent/state/`` (two hosts' scan JSON, one of them
  ``good-host-scan.json``; ``world:states_list`` their list, fed to ``fleet``'s stdin);
  ``-o FILE`` writes under a temporary directory (by its base name, never where the doc shows).

Special treatment, kept minimal: ``daemon`` lines run until ``/metrics`` answers with a
successful scan, then get SIGTERM (exit 0 expected); ``exec`` lines get ``--dry-run`` (nothing is
executed); ``vms --apply/--undo`` and the worked example talk to libvirt's test driver
(``test:///.../dgx-h100-node.xml``, needs virsh); ``--cross-check`` runs on this host (it is for
``/`` only); a remote libvirt URI is not run (:data:`NOT_RUN`).
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import msgspec
import pytest

from tests.daemon_helpers import free_port
from tests.plan_helpers import this_boot

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SAMPLES = REPO / "tests" / "core" / "parse" / "samples"
PASTES = REPO / "tests" / "core" / "paste_samples"
VMS = REPO / "tests" / "vms_samples"
LIBVIRT_XML = REPO / "tests" / "fixtures" / "libvirt" / "dgx-h100-node.xml"


class Case(msgspec.Struct, frozen=True):
    """How one doc line runs: allowed exit statuses, and what it needs."""

    exits: tuple[int, ...] = (0,)
    root: bool = True  # inject --root FIXTURE (unless the line names a root or pasted input)
    stdin: str | None = None  # a sample file fed to stdin
    env: dict[str, str] = {}
    mode: str = "run"  # run | daemon | libvirt-test


OK = Case()
NO_ROOT = Case(root=False)
FINDINGS = Case(exits=(0, 1))  # exit 1: findings at or above --fail-on (the fixture has warnings)
NAGIOS = Case(exits=(0, 1, 2))  # a Nagios plugin's OK, WARNING, CRITICAL
DAEMON = Case(mode="daemon")
LIBVIRT = Case(mode="libvirt-test")
FLEET = Case(exits=(0, 1), root=False)  # exit 1: a host outside its class's majority

#: Every command line the docs show -> how it runs here.
CASES: dict[str, Case] = {
    # README.md
    "topoagent scan": OK,
    "topoagent scan --format json": OK,
    "topoagent scan --format matrix": OK,
    "topoagent scan --all": OK,
    "topoagent scan --fail-on warning": FINDINGS,
    "topoagent scan --exit-codes nagios": NAGIOS,
    "topoagent scan --cross-check": Case(exits=(0, 1), root=False),  # live host only, by design
    "topoagent scan --root capture.tar.gz": OK,
    "topoagent baseline -o dgx.json": OK,
    "topoagent scan --expect dgx.json": FINDINGS,
    "topoagent fleet states/": FLEET,
    # docs/fleet.md
    "topoagent baseline -o /etc/topoagent/baseline.json": OK,
    "topoagent baseline --root capture.tar.gz -o dgx-h100.json": OK,
    "topoagent baseline --from-json good-host-scan.json": NO_ROOT,
    "topoagent scan --expect dgx-h100.json": FINDINGS,
    "topoagent fleet /srv/topoagent/state/": FLEET,
    "topoagent fleet": Case(exits=(0, 1), root=False, stdin="world:states_list"),
    "topoagent fleet hosts/ --expect dgx-h100.json --format json": FLEET,
    "topoagent plan": OK,
    "topoagent plan --format env --local-rank 3": OK,
    "topoagent plan --format slurm": OK,
    "topoagent plan --format nccl-topo": OK,
    "topoagent plan --format rails": OK,
    "topoagent plan --format dra": OK,
    "topoagent plan --format slurm --gres-cores l3cache": OK,
    "topoagent plan --bind core-complex": OK,
    "topoagent plan --format dra --claim gpu0,nic2,cpus=0-15": OK,
    "topoagent audit": OK,
    "topoagent health": OK,
    "topoagent exec --auto -- python train.py": Case(env={"LOCAL_RANK": "3"}),
    "topoagent apply --irqs": OK,
    "topoagent apply --undo --yes": OK,
    "topoagent fix acs": OK,
    "topoagent draw --format html -o host.html": OK,
    "topoagent vms": OK,
    "topoagent vms --esxcli-pci pci.txt --vmx vm.vmx": NO_ROOT,
    "topoagent daemon": DAEMON,
    "topoagent capture -o host.tar.gz": OK,
    # docs/audit.md
    "topoagent audit --format json": OK,
    # docs/capture.md
    "topoagent scan --root host.tar.gz": OK,
    "topoagent scan --root dir": OK,
    # docs/daemon.md
    "topoagent daemon --root host.tar.gz --listen 127.0.0.1:9500 --state-dir /tmp/st --interval 60": DAEMON,
    # docs/draw.md (and README's html line)
    "topoagent draw -o host.svg": OK,
    "topoagent draw --root /path/to/capture --format dot": OK,
    "topoagent draw --nvidia-smi-topo topo.txt --format html -o topo.html": OK,
    "topoagent draw --format png -o host.png": OK,
    # docs/offline.md
    "topoagent scan --paste issue.txt": FINDINGS,
    "topoagent scan --paste topo.txt --paste numactl.txt": FINDINGS,
    "topoagent scan --paste -": Case(exits=(0, 1), stdin="../../paste_samples/nvsmi_q_l4_idle_gen1.txt"),
    "topoagent scan --nvidia-smi-topo topo.txt --format matrix": OK,
    "topoagent scan --lspci-tree tree.txt --lspci-verbose vvv.txt": FINDINGS,
    "topoagent scan --lspci-verbose -": Case(exits=(0, 1), stdin="lspci/D_vvvnn_hgx_rootport_switch_vf.txt"),
    # docs/plan.md
    "topoagent plan --format json": OK,
    "topoagent plan --ranks-per-gpu 2 --reserve-cores 2 --split 2": OK,
    "topoagent plan --bind core-complex --ranks-per-gpu 2": OK,
    "topoagent exec --gpu 3 --dry-run -- python train.py": OK,
    "topoagent apply --pid 4242 --gpu 3": OK,
    "topoagent apply --pid 4242 --gpu 3 --yes": OK,
    "topoagent apply --pid 4242 --numa-node 0": OK,
    "topoagent apply --irqs --yes": OK,
    # docs/schedulers.md (the plan.md monitoring line is README's Nagios line with a redirection)
    # docs/vms.md
    "topoagent vms --connect qemu+ssh://h/system": Case(mode="not-run"),
    "topoagent vms --root /copy": OK,
    "topoagent vms --format json": OK,
    "topoagent vms --reserve-cores 2": OK,
    "topoagent vms --pin": OK,
    "topoagent vms --apply DOMAIN": LIBVIRT,
    "topoagent vms --apply DOMAIN --yes": LIBVIRT,
    "topoagent vms --undo DOMAIN": LIBVIRT,
    "topoagent vms --esxcli-pci pci.txt --vmx a.vmx --vmx b.vmx": NO_ROOT,
    "topoagent vms --root tests/... --connect test:///…/tests/fixtures/libvirt/dgx-h100-node.xml": LIBVIRT,
    "topoagent vms --esxcli-pci pci.txt --vmx vm1.vmx --vmx vm2.vmx": NO_ROOT,
    "topoagent vms --esxcli-pci tests/vms_samples/esxcli-hardware-pci-list-esxi7.txt "
    "--vmx tests/vms_samples/ml-infer-02.vmx --vmx …": NO_ROOT,
}

#: Lines that cannot run here, and why (they must still be in CASES, with mode "not-run").
NOT_RUN = {"topoagent vms --connect qemu+ssh://h/system": "a remote libvirt host over ssh"}

#: Options after which the next word is pasted input or a root (no --root is injected then).
INPUT_OPTIONS = {
    "--root",
    "--nvidia-smi-topo",
    "--lspci-tree",
    "--lspci-verbose",
    "--paste",
    "--esxcli-pci",
    "--connect",
}
#: Commands whose lines change things: they get a private --state-dir.
STATEFUL = {"apply", "fix"}
SHELL_OPERATORS = {"|", "||", ">", ">>", "<", "&&", ";", "&"}


def doc_commands() -> list[tuple[str, str]]:
    """(``file:line``, the topoagent command as its words joined by blanks) for every command
    line in a fenced code block of the docs."""
    found = []
    for path in DOCS:
        fenced = False
        pending, start = "", 0
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            if raw.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            if pending:
                raw, pending = pending + " " + raw.strip(), ""
            else:
                start = number
            if raw.rstrip().endswith("\\"):
                pending = raw.rstrip()[:-1]
                continue
            m = re.search(r"(?:^\s*(?:\$\s+)?(?:sudo\s+)?|(?:\||&&|;)\s*)(topoagent\s.*)$", raw)
            if m:
                found.append((f"{path.relative_to(REPO)}:{start}", command_words(m.group(1))))
    return found


def command_words(text: str) -> str:
    """The command's words up to a comment, a pipe or a redirection."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for word in lexer:
        if word in SHELL_OPERATORS:
            if words and words[-1].isdigit():  # 2>file
                words.pop()
            break
        words.append(word)
    return " ".join(words)


# -- the shared fixture ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(module_tmp):
    """The fixture root (dgx-h100 with libvirt definitions), a capture of it, the capture
    unpacked, a private state directory, and a process for ``apply --pid`` to bind."""
    from tests.fakesysfs import generate
    from topoagent.core.read.archive import unpack_capture
    from topoagent.features.capture.collect import collect_capture
    from topoagent.features.capture.pack import entries_to_tar

    base = module_tmp
    # this machine's running boot (tests/plan_helpers.this_boot): `apply --pid 4242 --yes` binds
    # the real process this test starts, which only this machine's own tree may do
    root = this_boot(generate("dgx-h100", base / "root"))
    qemu = root / "etc" / "libvirt" / "qemu"
    shutil.copytree(REPO / "tests" / "fixtures" / "libvirt" / "qemu", qemu)
    capture = base / "host.tar.gz"  # of a small host: it is unpacked by several commands
    with open(capture, "wb") as fh:
        entries_to_tar(collect_capture(str(generate("cloud-vm", base / "small")), tools=False).ordered(), fh)
    unpack_capture(str(capture), str(base / "unpacked"))
    (base / "out").mkdir()
    # a baseline of the fixture, and a directory of two hosts' scan JSON for fleet
    states = base / "states"
    states.mkdir()
    cli = [sys.executable, "-m", "topoagent"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, host in (("a.json", root), ("b.json", base / "small")):
        scan_json = subprocess.run(
            [*cli, "scan", "--root", str(host), "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        ).stdout
        (states / name).write_text(scan_json)
    subprocess.run(
        [*cli, "baseline", "--root", str(root), "-o", str(base / "baseline.json")],
        env=env,
        timeout=120,
        check=True,
        capture_output=True,
    )
    (base / "states.list").write_text("".join(f"{p}\n" for p in sorted(states.iterdir())))
    sleeper = subprocess.Popen(["sleep", "300"])
    yield {
        "base": base,
        "root": root,
        "capture": capture,
        "pid": sleeper.pid,
        "states": states,
        "baseline": base / "baseline.json",
        "scan_json": states / "a.json",
        "states_list": base / "states.list",
    }
    sleeper.kill()
    sleeper.wait()


def substitute(words: list[str], world: dict, port: int) -> list[str]:
    base: Path = world["base"]
    places = {
        "topo.txt": SAMPLES / "nvsmi" / "h100_nv18_9nic_tabs.txt",
        "issue.txt": PASTES / "dmesg_aer_and_lspci_tree_laptop.txt",
        "numactl.txt": PASTES / "numactl_nps4_memoryless_nodes.txt",
        "tree.txt": SAMPLES / "lspci" / "tree_hgx_h100_tvnn.txt",
        "vvv.txt": SAMPLES / "lspci" / "D_vvvnn_hgx_rootport_switch_vf.txt",
        "pci.txt": VMS / "esxcli-hardware-pci-list-esxi7.txt",
        "vm.vmx": VMS / "ml-train-01.vmx",
        "a.vmx": VMS / "ml-train-01.vmx",
        "vm1.vmx": VMS / "ml-train-01.vmx",
        "b.vmx": VMS / "ml-infer-02.vmx",
        "vm2.vmx": VMS / "ml-infer-02.vmx",
        "…": VMS / "ml-dev-03.vmx",
        "host.tar.gz": world["capture"],
        "capture.tar.gz": world["capture"],
        "/path/to/capture": world["capture"],
        "dir": base / "unpacked",
        "/copy": world["root"],
        "tests/...": world["root"],
        "/tmp/st": base / "daemon-state",
        "4242": world["pid"],
        "DOMAIN": "gpu-unset",
        "127.0.0.1:9500": f"127.0.0.1:{port}",
        "dgx.json": world["baseline"],
        "dgx-h100.json": world["baseline"],
        "good-host-scan.json": world["scan_json"],
        "states/": world["states"],
        "/srv/topoagent/state/": world["states"],
        "hosts/": world["states"],
    }
    out: list[str] = []
    for i, word in enumerate(words):
        if i and words[i - 1] in ("-o", "--output"):
            out.append(str(base / "out" / Path(word).name))  # never where the doc shows (/etc/...)
        elif word.startswith("test:///"):
            out.append(f"test:///{LIBVIRT_XML}")
        elif word.startswith("tests/") and word not in places:
            out.append(str(REPO / word))
        else:
            out.append(str(places.get(word, word)))
    return out


def runnable(cmd: str, case: Case, world: dict, port: int) -> list[str]:
    """The doc line as this test runs it (module docstring)."""
    words = substitute(cmd.split()[1:], world, port)
    head, sep, tail = (
        (words[: words.index("--")], ["--"], words[words.index("--") + 1 :]) if "--" in words else (words, [], [])
    )
    extra: list[str] = []
    if case.root and not INPUT_OPTIONS & set(head):
        extra += ["--root", str(world["root"])]
    if head[0] in STATEFUL or case.mode == "libvirt-test" and ("--apply" in head or "--undo" in head):
        extra += ["--state-dir", str(world["base"] / "state")]
    if head[0] == "exec" and "--dry-run" not in head:
        extra.append("--dry-run")
    if case.mode == "libvirt-test" and "--connect" not in head:
        extra += ["--connect", f"test:///{LIBVIRT_XML}"]
    if case.mode == "daemon":
        if "--listen" not in head:
            extra += ["--listen", f"127.0.0.1:{port}"]
        if "--state-dir" not in head:
            extra += ["--state-dir", str(world["base"] / "daemon-state")]
    return [sys.executable, "-m", "topoagent", *head, *extra, *sep, *tail]


def run_daemon(argv: list[str], port: int, env: dict[str, str]) -> tuple[int, str]:
    """Start the daemon, wait for /metrics to report a successful scan, stop it with SIGTERM."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    metrics = ""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
                    metrics = reply.read().decode()
                if "topoagent_scan_success 1" in metrics:
                    break
            except OSError:
                pass
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "topoagent_scan_success 1" in metrics, err
    return proc.returncode, err


# -- the tests -------------------------------------------------------------------------------


def test_every_doc_command_is_in_the_table():
    shown = {cmd for _, cmd in doc_commands()}
    unknown = [f"{where}: {cmd}" for where, cmd in doc_commands() if cmd not in CASES]
    assert not unknown, "doc command lines this test does not know (add them to CASES):\n" + "\n".join(unknown)
    stale = sorted(set(CASES) - shown)
    assert not stale, f"CASES lists lines no doc shows any more: {stale}"
    assert {cmd for cmd, case in CASES.items() if case.mode == "not-run"} == set(NOT_RUN)


def _runnable_lines() -> list[tuple[str, str]]:
    """(where the docs first show it, command) for every doc line this test runs, each once."""
    seen: dict[str, str] = {}
    for where, cmd in doc_commands():
        if cmd in CASES and CASES[cmd].mode != "not-run":
            seen.setdefault(cmd, where)
    return [(where, cmd) for cmd, where in seen.items()]


def _stateful(cmd: str) -> bool:
    """Whether a line changes state other lines share (a journal, the daemon's state directory
    and lock, libvirt backups): such lines run one after another, in doc order."""
    case = CASES[cmd]
    return case.mode in ("daemon", "libvirt-test") or cmd.split()[1] in STATEFUL


@pytest.fixture(scope="module")
def doc_env() -> dict[str, str]:
    """This environment less what would allocate GPUs or name a rank, with the checkout on the path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "LOCAL_RANK",
            "SLURM_LOCALID",
            "SLURM_JOB_ID",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "MPI_LOCALRANKID",
            "CUDA_VISIBLE_DEVICES",
            "SLURM_STEP_GPUS",
        )
    }
    env["PYTHONPATH"] = str(REPO)
    return env


def _run_doc_line(where: str, cmd: str, world: dict, env: dict[str, str]) -> str | None:
    """Run one doc line as :func:`runnable` makes it; what went wrong, or None."""
    case = CASES[cmd]
    port = free_port()
    argv = runnable(cmd, case, world, port)
    if case.mode == "daemon":
        code, err = run_daemon(argv, port, {**env, **case.env})
    else:
        stdin = ""
        if case.stdin:  # a sample file, or a file this test made (world:KEY)
            key = case.stdin.removeprefix("world:")
            stdin = (world[key] if key != case.stdin else SAMPLES / case.stdin).read_text()
        proc = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, **case.env},
            cwd=world["base"],
            check=False,
        )
        code, err = proc.returncode, proc.stderr
    if code not in case.exits or "Traceback" in err:
        return f"{where}: {cmd}\n  ran: {shlex.join(argv[2:])}\n  exit {code}: {err.strip()[-500:]}"
    return None


def test_every_doc_command_runs(world, doc_env):
    """Every line once, two processes at a time (the lines are independent, each a process that
    waits on its own work): the stateful lines one after another in one lane, in doc order
    (``--undo`` undoes what ``--apply ... --yes`` did), every other line beside them."""
    if shutil.which("virsh") is None:
        pytest.skip("virsh is not installed (vms --apply/--undo and the worked example need it)")
    lines = [
        (where, cmd)
        for where, cmd in _runnable_lines()
        if not (cmd.startswith("topoagent draw --format png") and shutil.which("dot") is None)
    ]
    lane = [line for line in lines if _stateful(line[1])]
    assert lane and len(lane) < len(lines)

    def run_lane() -> list[str | None]:
        return [_run_doc_line(where, cmd, world, doc_env) for where, cmd in lane]

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(run_lane)]
        jobs += [
            pool.submit(_run_doc_line, where, cmd, world, doc_env) for where, cmd in lines if (where, cmd) not in lane
        ]
        results = [job.result() for job in jobs]
    failures = [f for r in results for f in (r if isinstance(r, list) else [r]) if f is not None]
    assert not failures, "\n".join(failures)


def readme_python() -> str:
    """The README's Python API example (its one ``python`` block)."""
    (block,) = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL)
    return block


def test_the_readme_python_example_runs_here_and_on_a_gpu_host(world):
    # As shown: on this host, whatever it has (the CI and development VMs have no GPU).
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    here = subprocess.run(
        [sys.executable, "-c", readme_python()], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert here.returncode == 0 and "Traceback" not in here.stderr, here.stderr
    assert re.match(r"\d+ GPU\(s\), \d+ NIC\(s\), \d+ finding\(s\)\n", here.stdout)
    # On a GPU node (the fixture): the rails and a path class.
    code = readme_python().replace('topoagent.scan("/")', f"topoagent.scan({str(world['root'])!r})")
    gpu = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert gpu.returncode == 0, gpu.stderr
    lines = gpu.stdout.splitlines()
    assert lines[0].startswith("8 GPU(s), 14 NIC(s)") and "gpu0 nic2 PIX" in lines
    assert lines[-1] in ("PIX", "PXB", "PHB", "NODE", "SYS")  # gpu0 to nic0, by id and BDF


def test_dir_lists_the_lazy_api():
    import topoagent

    assert set(topoagent.__all__) <= set(dir(topoagent))
