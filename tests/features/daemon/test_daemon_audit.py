"""The daemon's audit of the processes using the GPUs: per-GPU metrics from the same audit as
``topoagent audit`` (tests/features/audit/test_audit.py's fake /proc), and a failed audit that
never costs the scan."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakesysfs import generate, load_machine
from tests.features.audit.test_audit import PROCESSES, hostile_host
from topoagent.core.api import scan
from topoagent.features.daemon.config import Config, load
from topoagent.features.daemon.loop import default_audit
from topoagent.features.daemon.metrics import render_text
from topoagent.features.daemon.status import Attempt, Status


@pytest.fixture(scope="module")
def host(module_tmp):
    desc = load_machine("dgx-h100")
    desc["machine"]["nvidia_procfs"] = True
    desc["process"] = PROCESSES
    return generate(desc, module_tmp / "dgx")


def samples(status: Status) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(render_text(status).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_per_gpu_metrics_count_the_processes_and_the_misplaced(host, tmp_path):
    config = Config(root=str(host), state_dir=str(tmp_path), nvml=False)
    result = scan(host, nvml="off")
    audit = default_audit(config, result)
    assert audit is not None and audit.source == "fd"
    status = Status(started_at=0.0, result=result, last=Attempt(0.0, True, 0.1), audit=audit)
    got = samples(status)
    gpu1 = (("gpu", "gpu1"), ("gpu_bdf", "0000:43:00.0"))
    assert got[("topoagent_gpu_processes", gpu1)] == 1
    for code in ("PROCESS_CPUS_OFF_GPU_NODE", "PROCESS_MEMORY_OFF_GPU_NODE", "PROCESS_HCA_NOT_RAIL"):
        assert got[("topoagent_gpu_processes_misplaced", (("code", code), *gpu1))] == 1
    gpu0 = (("gpu", "gpu0"), ("gpu_bdf", "0000:1b:00.0"))
    assert got[("topoagent_gpu_processes", gpu0)] == 1
    assert ("topoagent_gpu_processes_misplaced", (("code", "PROCESS_CPUS_OFF_GPU_NODE"), *gpu0)) not in got
    gpu5 = (("gpu", "gpu5"), ("gpu_bdf", "0000:c3:00.0"))
    assert got[("topoagent_gpu_processes_misplaced", (("code", "PROCESS_MEMORY_OFF_GPU_NODE"), *gpu5))] == 1
    assert got[("topoagent_audit_unreadable_processes", ())] == 0
    # only where a finding names a process (the series budget): gpu1's three and gpu5's one
    misplaced = [labels for name, labels in got if name == "topoagent_gpu_processes_misplaced"]
    assert len(misplaced) == 4 and all(got[("topoagent_gpu_processes_misplaced", k)] >= 1 for k in misplaced)


def test_the_audit_can_be_turned_off(host, tmp_path):
    config = Config(root=str(host), state_dir=str(tmp_path), audit=False)
    assert default_audit(config, scan(host, nvml="off")) is None
    cfg = tmp_path / "config.toml"
    cfg.write_text("audit = false\n")
    assert load(str(cfg)).audit is False
    cfg.write_text('audit = "no"\n')
    with pytest.raises(Exception, match="audit"):
        load(str(cfg))
    status = Status(started_at=0.0, result=scan(host, nvml="off"), last=Attempt(0.0, True, 0.1))
    assert not any(name.startswith("topoagent_gpu_processes") for name, _ in samples(status))


def daemon_audit(host, config, **kw):
    """The daemon's audit of ``host`` (its scan, the audit's report and the warnings it logged)."""
    from topoagent.features.daemon.loop import Daemon

    warnings = []

    class Log:
        def warning(self, event, **kw):
            warnings.append((event, kw))

        def __getattr__(self, name):
            return lambda *a, **k: None

    d = Daemon(config, log=Log(), install_signals=False, **kw)
    try:
        result = scan(host, nvml="off")
        return result, d._audit(config, result), warnings
    finally:
        d._teardown()


def test_a_failed_audit_never_costs_the_scan(host, tmp_path):
    config = Config(root=str(host), state_dir=str(tmp_path), nvml=False, udev=False)

    def broken(cfg, result):
        raise OSError("no /proc")

    _, audit, warnings = daemon_audit(host, config, audit=broken)
    assert audit is None
    assert warnings and warnings[0][0] == "audit_failed" and "no /proc" in warnings[0][1]["error"]


def test_one_process_s_bad_data_never_costs_the_audit_its_series(module_tmp, tmp_path):
    """Issue 44 item 1: a process's own NCCL_IB_HCA with a 5,000-digit port (and a forged
    numa_maps, and a status field no audit uses) made every scan log ``audit_failed`` and export
    no process series, so TopoagentProcessMisplaced could fire for no one."""
    host = hostile_host(module_tmp / "hostile")
    config = Config(root=str(host), state_dir=str(tmp_path), nvml=False, udev=False)
    result, audit, warnings = daemon_audit(host, config)
    assert warnings == [] and audit is not None
    got = samples(Status(started_at=0.0, result=result, last=Attempt(0.0, True, 0.1), audit=audit))
    for gpu, bdf in (
        ("gpu0", "0000:1b:00.0"),
        ("gpu1", "0000:43:00.0"),
        ("gpu3", "0000:61:00.0"),
        ("gpu6", "0000:d1:00.0"),
    ):
        assert got[("topoagent_gpu_processes", (("gpu", gpu), ("gpu_bdf", bdf)))] == 1
    gpu1 = (("code", "PROCESS_CPUS_OFF_GPU_NODE"), ("gpu", "gpu1"), ("gpu_bdf", "0000:43:00.0"))
    assert got[("topoagent_gpu_processes_misplaced", gpu1)] == 1
    assert got[("topoagent_audit_unreadable_processes", ())] == 0
