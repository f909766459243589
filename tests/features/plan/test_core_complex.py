"""Core-complex binding (``--bind core-complex``) and Slurm's ``l3cache_as_socket`` form, on a
fixture with eight L3 caches (AMD CCDs) per socket (tests/fixtures/machines/epyc-genoa-ccd.toml).

The rules: every CPU set a rank or GPU gets is whole L3 domains where there are at least as
many domains as takers, and never straddles two domains otherwise (torchrun's
``--numa-binding=core-complex``, pytorch/pytorch torch/numa/binding.py, binds each rank to one
core complex of its GPU's node); Slurm under ``SlurmdParameters=l3cache_as_socket`` counts each
L3 as a socket (src/slurmd/common/xcpuinfo.c), so a GPU's Cores= must cover whole L3s.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.features.plan.test_gres_slurm import gres_lines, socket_rule_ok
from tests.plan_helpers import topoagent
from topoagent.cli import cli
from topoagent.core.advice.cores import complexes_in, split_units
from topoagent.core.advice.plan import PlanOptions
from topoagent.core.api import scan
from topoagent.core.cpuset import CpuSet

GENOA = "epyc-genoa-ccd"


def ccd(i: int) -> CpuSet:
    """CCD i of the fixture: 8 cores and their SMT siblings (+128)."""
    return CpuSet([*range(8 * i, 8 * i + 8), *range(128 + 8 * i, 128 + 8 * i + 8)])


@pytest.fixture(scope="module")
def genoa(fixture_root):
    return scan(fixture_root(GENOA), nvml="off")


def test_the_kernels_l3_domains_are_read(genoa):
    assert genoa.snapshot.l3_domains == tuple(ccd(i) for i in range(16))


def test_rank_k_gets_the_ccds_of_gpu_k(genoa):
    plan = genoa.plan_with(PlanOptions(bind="core-complex"))
    assert plan.bind == "core-complex" and not plan.notes
    for k, g in enumerate(plan.gpus):
        first = 2 * k  # GPU k: the k-th pair of CCDs (four GPUs per socket, eight CCDs)
        assert g.rank_cpus == (ccd(first) | ccd(first + 1),), g.gpu
    two = genoa.plan_with(PlanOptions(bind="core-complex", ranks_per_gpu=2))
    assert [r for g in two.gpus for r in g.rank_cpus] == [ccd(i) for i in range(16)]


def test_the_plan_json_says_how_it_was_cut(fixture_root):
    import json

    for bind, root in (("core-complex", GENOA), ("numa", "dgx-a100-nps4")):
        out = topoagent(
            "plan", "--root", str(fixture_root(root)), "--no-nvml", "--format", "json", "--bind", "core-complex"
        )
        doc = json.loads(out.stdout)
        assert doc["bind"] == bind  # the NPS4 fixture names no L3: the plan fell back, and says so
        assert ("CORE_COMPLEX_UNKNOWN" in {n["code"] for n in doc["notes"]}) is (bind == "numa")


def test_a_reservation_never_makes_a_rank_straddle_two_ccds(genoa):
    complexes = genoa.plan_with(PlanOptions(bind="core-complex", ranks_per_gpu=2, reserve_cores=1))
    runs = genoa.plan_with(PlanOptions(bind="numa", ranks_per_gpu=2, reserve_cores=1))

    def straddles(cpus: CpuSet) -> bool:
        return sum(1 for i in range(16) if cpus & ccd(i)) > 1

    assert any(straddles(r) for g in runs.gpus for r in g.rank_cpus)  # why the mode exists
    assert not any(straddles(r) for g in complexes.gpus for r in g.rank_cpus)
    assert complexes.gpus[0].rank_cpus[0] == ccd(0) - {0, 128}  # the reserved core stays out


def test_more_ranks_than_ccds_share_one_ccd_each_never_two(genoa):
    plan = genoa.plan_with(PlanOptions(bind="core-complex", ranks_per_gpu=4))
    ranks = plan.gpus[0].rank_cpus  # two CCDs for four ranks: two ranks per CCD, 4 cores each
    assert ranks == (
        CpuSet([0, 1, 2, 3, 128, 129, 130, 131]),
        CpuSet([4, 5, 6, 7, 132, 133, 134, 135]),
        CpuSet([8, 9, 10, 11, 136, 137, 138, 139]),
        CpuSet([12, 13, 14, 15, 140, 141, 142, 143]),
    )


def test_split_units_spreads_parts_over_fewer_units():
    cores = tuple(CpuSet([i]) for i in range(6))
    units = complexes_in(cores, (CpuSet([0, 1, 2]), CpuSet([3, 4, 5])))
    assert units == (CpuSet([0, 1, 2]), CpuSet([3, 4, 5]))
    assert split_units(units, 2, cores).parts == units
    assert split_units(units, 3, cores).parts == (CpuSet([0, 1]), CpuSet([2]), CpuSet([3, 4, 5]))
    assert split_units(units, 1, cores).parts == (CpuSet(range(6)),)
    # a core the domains do not name is a unit of its own
    assert complexes_in(cores, (CpuSet([0, 1, 2]),)) == (CpuSet([0, 1, 2]), *cores[3:])


def test_without_l3_domains_the_plan_says_so_and_cuts_runs_of_cores(fixture_root):
    dgx = scan(fixture_root("dgx-a100-nps4"), nvml="off")  # no cache files in this fixture
    assert dgx.snapshot.l3_domains == ()
    plan = dgx.plan_with(PlanOptions(bind="core-complex"))
    assert plan.bind == "numa"
    assert [n.code for n in plan.notes] == ["CORE_COMPLEX_UNKNOWN"]
    assert [g.rank_cpus for g in plan.gpus] == [g.rank_cpus for g in dgx.plan_with(PlanOptions()).gpus]


@pytest.mark.parametrize("rank", [0, 3, 5, 15])
def test_exec_binds_each_rank_to_its_ccd(fixture_root, monkeypatch, rank):
    """``exec --bind core-complex``: the CPUs it would bind local rank ``rank`` to (two ranks per
    GPU: rank r is on GPU r // 2, and gets CCD r).  This process's own CPUs bound the plan, so
    they are widened to the fixture's for the dry run."""
    monkeypatch.setattr("topoagent.features.plan.options.allowed_cpus", lambda: CpuSet(range(256)))
    out = CliRunner().invoke(
        cli,
        [
            "exec",
            "--root",
            str(fixture_root(GENOA)),
            "--no-nvml",
            "--bind",
            "core-complex",
            "--ranks-per-gpu",
            "2",
            "--local-rank",
            str(rank),
            "--dry-run",
            "--",
            "python",
            "train.py",
        ],
        env={"CUDA_VISIBLE_DEVICES": None, "SLURM_STEP_GPUS": None, "NVIDIA_VISIBLE_DEVICES": None},
    )
    assert out.exit_code == 0, out.output
    assert out.output.startswith(f"# gpu{rank // 2} ")
    assert f"cpu affinity: {ccd(rank)}\n" in out.output
    assert "export OMP_NUM_THREADS=8\n" in out.output


# -- Slurm: l3cache_as_socket -----------------------------------------------------------------------


def l3cache_gres(fixture_root) -> str:
    out = topoagent(
        "plan", "--root", str(fixture_root(GENOA)), "--no-nvml", "--format", "slurm", "--gres-cores", "l3cache"
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_l3cache_cores_are_each_gpus_own_whole_l3s(fixture_root):
    text = l3cache_gres(fixture_root)
    assert "#   SlurmdParameters=l3cache_as_socket" in text
    assert "Sockets=16 CoresPerSocket=8" in text
    cores = [CpuSet.parse(e["Cores"]) for e in gres_lines(text) if e.get("Name") == "gpu"]
    assert cores == [CpuSet(range(16 * k, 16 * k + 16)) for k in range(8)]
    assert all(socket_rule_ok(c, 16, 8) for c in cores)  # whole L3s: whole sockets to slurmd


def test_l3cache_without_l3_domains_is_one_line(fixture_root):
    out = topoagent(
        "plan",
        "--root",
        str(fixture_root("dgx-a100-nps4")),
        "--no-nvml",
        "--format",
        "slurm",
        "--gres-cores",
        "l3cache",
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no L3 cache domains" in out.stderr


def test_one_l3_per_socket_shares_it_out_as_numa_binding_does(fixture_root):
    """Intel (the DGX H100 fixture): one L3 spans each socket, so four GPUs share one complex --
    each gets its own cores within it, as --bind numa gives them, and Cores= are whole sockets."""
    dgx = scan(fixture_root("dgx-h100"), nvml="off")
    assert len(dgx.snapshot.l3_domains) == 2
    complexes = dgx.plan_with(PlanOptions(bind="core-complex"))
    assert complexes.bind == "core-complex" and not complexes.notes
    assert [g.rank_cpus for g in complexes.gpus] == [g.rank_cpus for g in dgx.plan_with(PlanOptions()).gpus]
    out = topoagent(
        "plan", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "--format", "slurm", "--gres-cores", "l3cache"
    )
    cores = [CpuSet.parse(e["Cores"]) for e in gres_lines(out.stdout) if e.get("Name") == "gpu"]
    assert cores == [CpuSet(range(56))] * 4 + [CpuSet(range(56, 112))] * 4


def test_l3cache_core_numbers_are_hwlocs_cores_l3_by_l3(fixture_root):
    """Slurm numbers cores in hwloc's logical order within its sockets (here the L3 objects):
    the Cores= of GPU k must be the logical indices of the cores under L3 objects 2k, 2k+1."""
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        pytest.skip("lstopo (hwloc) not installed")
    xml = subprocess.run(
        [lstopo, "-i", str(fixture_root(GENOA)), "--of", "xml"], capture_output=True, text=True, timeout=120
    )
    if xml.returncode != 0:
        pytest.skip(f"lstopo cannot read the fake tree: {xml.stderr.strip()[:200]}")
    root = ET.fromstring(xml.stdout)
    l3s = [o for o in root.iter("object") if o.get("type") == "L3Cache"]
    assert len(l3s) == 16
    core_index = {id(c): i for i, c in enumerate(o for o in root.iter("object") if o.get("type") == "Core")}
    under = [sorted(core_index[id(c)] for c in l3.iter("object") if c.get("type") == "Core") for l3 in l3s]
    text = l3cache_gres(fixture_root)
    cores = [sorted(CpuSet.parse(e["Cores"])) for e in gres_lines(text) if e.get("Name") == "gpu"]
    assert cores == [under[2 * k] + under[2 * k + 1] for k in range(8)]


def _node_line(text: str) -> str:
    """The slurm.conf NodeName line the output prints (issue 40: l3cache prints it, as numa does)."""
    return next(line[4:] for line in text.splitlines() if line.startswith("#   NodeName="))


def _slurm_dir(fixture_root, tmp_path, node_line: str, **ports: int) -> dict[str, str]:
    """gres.conf (the output, File= moved to plain files) and slurm.conf for the Genoa fixture
    under l3cache_as_socket; the environment that points slurmd's hwloc at the fake tree."""
    text = l3cache_gres(fixture_root)
    for i in range(8):
        (tmp_path / f"nvidia{i}").touch()
    (tmp_path / "gres.conf").write_text(text.replace("File=/dev/nvidia", f"File={tmp_path}/nvidia"))
    extra = "".join(f"{key}={value}\n" for key, value in ports.items())
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=t\nSlurmctldHost=localhost(127.0.0.1)\nGresTypes=gpu\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\nSlurmdParameters=l3cache_as_socket\n"
        f"{extra}{node_line} NodeAddr=127.0.0.1 RealMemory=1000 Gres=gpu:8\n"
        "PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
    )
    return {
        **os.environ,
        "HWLOC_FSROOT": str(fixture_root(GENOA)),
        "HWLOC_THISSYSTEM": "1",
        "SLURM_CONF": str(tmp_path / "slurm.conf"),
    }


def test_slurmd_reads_the_l3cache_file_where_installed(fixture_root, tmp_path):
    """Debian's slurmd, where installed: ``slurmd -G`` with ``SlurmdParameters=l3cache_as_socket``
    and the NodeName line the output prints parses the file against the fixture's hardware
    (hwloc pointed at the tree) and echoes every GPU line with its Cores= -- no "Invalid GRES
    data", no fatal (as test_gres_slurm does)."""
    slurmd = shutil.which("slurmd")
    if slurmd is None:
        pytest.skip("slurmd not installed (Debian package slurmd)")
    text = l3cache_gres(fixture_root)
    assert _node_line(text) == "NodeName=genoa-hgx-01 CPUs=256 Sockets=16 CoresPerSocket=8 ThreadsPerCore=2"
    env = _slurm_dir(fixture_root, tmp_path, _node_line(text))
    out = subprocess.run(
        [slurmd, "-G", "-f", str(tmp_path / "slurm.conf"), "-N", "genoa-hgx-01"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    log = out.stdout + out.stderr
    assert "Invalid GRES" not in log and "fatal" not in log, log[-2000:]
    echoed = re.findall(r"Gres Name=gpu .*? Cores=(\S+)", log)
    assert echoed == [e["Cores"] for e in gres_lines(text) if e.get("Name") == "gpu"], log[-2000:]


#: The jobs of the slurmctld test: eight of 16 CPUs (one per GPU), then six of 8.
WAVES = ((16,) * 8, (8,) * 6)


def _until(check, what: str, logs=None, tries: int = 120):
    """Poll ``check`` (a second apart) until it gives a true value; fail naming ``what``, with
    the end of the daemons' logs in ``logs`` (a directory) where there are any."""
    for _ in range(tries):
        got = check()
        if got:
            return got
        time.sleep(1)
    tails = "".join(
        f"\n{log.name}: {log.read_text()[-1500:]}" for log in sorted(Path(logs or "/nonexistent").glob("*.log"))
    )
    pytest.fail(f"slurm: {what}{tails}")


@pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("slurmctld", "slurmd", "sbatch", "scontrol", "scancel")),
    reason="needs root and Slurm's slurmctld, slurmd and client (Debian slurmctld, slurmd, slurm-client)",
)
def test_slurmctld_places_each_gpus_jobs_on_its_ccds(fixture_root, tmp_path):
    """Issue 40: with the printed NodeName line (16 L3s as sockets of 8 cores), Slurm 22.05's
    slurmctld, with slurmd reading the fixture's hardware, places each of 14 GPU jobs
    (``--gres=gpu:1 --gres-flags=enforce-binding``) on CPUs of its own GPU's core complexes; with
    the line ``slurmd -C`` prints (2 sockets of 64 cores) it does not.  A cluster of one node on
    loopback ports (auth/none), each job a ``sleep``; its CPUs are read back from ``scontrol show
    job -d`` (``CPU_IDs``: Slurm's abstract CPU numbers, two threads per abstract core)."""
    from tests.daemon_helpers import free_port

    text = l3cache_gres(fixture_root)
    mine = [CpuSet.parse(e["Cores"]) for e in gres_lines(text) if e.get("Name") == "gpu"]
    cpus = [CpuSet(t for c in cores for t in (2 * c, 2 * c + 1)) for cores in mine]
    for node_line, right in (
        (_node_line(text), True),
        ("NodeName=genoa-hgx-01 CPUs=256 Sockets=2 CoresPerSocket=64 ThreadsPerCore=2", False),
    ):
        run = tmp_path / ("printed" if right else "slurmd-C")
        (run / "state").mkdir(parents=True)
        # slurmstepd's socket lives in the spool directory, and a socket's path has at most 107
        # bytes: a test's own directory is too deep for it
        spool = Path(tempfile.mkdtemp(prefix="ts-spool", dir="/tmp"))
        env = _slurm_dir(
            fixture_root,
            run,
            node_line,
            SlurmctldPort=free_port(),
            SlurmdPort=free_port(),
            AuthType="auth/none",
            CredType="cred/none",
            TaskPlugin="task/none",
            ProctrackType="proctrack/pgid",
            SlurmUser="root",
            StateSaveLocation=run / "state",
            SlurmdSpoolDir=spool,
            SlurmctldPidFile=run / "ctld.pid",
            SlurmdPidFile=run / "d.pid",
            SlurmctldLogFile=run / "slurmctld.log",
            SlurmdLogFile=run / "slurmd.log",
            AccountingStorageType="accounting_storage/none",
            JobCompType="jobcomp/none",
            MpiDefault="none",
        )
        try:
            placed = _run_waves(env, run)
        finally:
            shutil.rmtree(spool, ignore_errors=True)
        assert len(placed) == 14, placed
        on_own = [gpu for gpu, got in placed if got <= cpus[gpu]]
        assert (len(on_own) == 14) is right, (node_line, placed)


def _run_waves(env: dict[str, str], run) -> list[tuple[int, CpuSet]]:
    """Start slurmctld and slurmd, submit :data:`WAVES` (each wave ended before the next), and
    return each job's GPU index and CPUs; the daemons and their jobs end before it returns."""

    def tool(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False).stdout

    def jobs() -> list[tuple[str, int, CpuSet]]:
        out = []
        for job in tool("scontrol", "show", "job", "-d").split("JobId=")[1:]:
            found = re.search(r"JobState=RUNNING\b.*?CPU_IDs=(\S+).*?GRES=gpu:1\(IDX:(\d+)\)", job, re.S)
            if found:
                out.append(("RUNNING", int(found.group(2)), CpuSet.parse(found.group(1))))
        return out

    conf = str(run / "slurm.conf")
    daemons = [
        subprocess.Popen(["slurmctld", "-D", "-f", conf], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    ]
    try:
        _until(lambda: tool("scontrol", "ping").count("UP") >= 1, "slurmctld did not answer", run)
        daemons.append(
            subprocess.Popen(
                ["slurmd", "-D", "-N", "genoa-hgx-01", "-f", conf],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        )
        _until(lambda: "idle" in tool("sinfo", "-h", "-o", "%T"), "the node did not come up idle", run)
        placed = []
        for wave in WAVES:
            for size in wave:
                tool(
                    "sbatch",
                    "-Q",
                    "--gres=gpu:1",
                    "--gres-flags=enforce-binding",
                    f"-c{size}",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "sleep 120",
                )

            def started(n: int = len(wave)) -> list[tuple[str, int, CpuSet]] | None:
                running = [x for x in jobs() if x[0] == "RUNNING"]
                return running if len(running) == n else None

            running = _until(started, "the jobs did not all start", run)
            placed += [(gpu, got) for _, gpu, got in running]
            tool("scancel", "--user", "root")
            _until(lambda: not tool("squeue", "-h"), "the jobs did not end", run)
        return placed
    finally:
        tool("scancel", "--user", "root")
        _until(lambda: not tool("squeue", "-h"), "the jobs did not end", run, tries=30)
        tool("scontrol", "shutdown")
        for d in reversed(daemons):
            try:
                d.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait(timeout=30)


def test_a_capture_keeps_the_l3_domains(fixture_root, tmp_path):
    from topoagent.core.read.archive import unpack_capture
    from topoagent.features.capture.collect import collect_capture
    from topoagent.features.capture.pack import entries_to_tar

    cap = collect_capture(str(fixture_root(GENOA)), tools=False)
    path = tmp_path / "c.tar.gz"
    with path.open("wb") as f:
        entries_to_tar(cap.ordered(), f)
    replay = unpack_capture(str(path), str(tmp_path / "x"))
    assert scan(replay, nvml="off").snapshot.l3_domains == tuple(ccd(i) for i in range(16))
