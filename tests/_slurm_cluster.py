"""A real two-node Slurm cluster on localhost, for the tests of dsbench on a cluster.

Slurm 22.05 (Debian's slurm-wlm, installed by ``tests/install_slurm.sh``) runs two slurmd on
one machine as root: both nodes have ``NodeAddr=127.0.0.1`` and each its own ``Port=``, and
``slurmd -N n1`` / ``slurmd -N n2`` start one each. :class:`LocalSlurm` writes its own
``slurm.conf`` into a folder of its own (state, spool, logs, pid files; free ports), starts
MUNGE (the system's munged, when it is not running yet), slurmctld and both slurmd, waits
until both nodes are idle, and stops everything it started when it is closed. Every Slurm
command finds this cluster through ``SLURM_CONF`` (:attr:`LocalSlurm.env`).

Without root, or without Slurm installed, :func:`unavailable` says why; the tests then skip
(fail when ``$CI`` is set).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SBIN = ("/usr/sbin", "/sbin")
NODES = ("n1", "n2")
CPUS_PER_NODE = min(2, os.cpu_count() or 1)
"""What each node declares: never more than this machine has (slurmd marks a node that declares
more CPUs or memory than it finds invalid, and it never becomes idle)."""


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 1000


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


def unavailable() -> str | None:
    """Why a local cluster cannot start here, or None."""
    if os.geteuid() != 0:
        return "a local Slurm cluster runs its daemons as root (this user is not root)"
    missing = [t for t in ("sbatch", "srun", "scontrol", "slurmctld", "slurmd", "munged")
               if _tool(t) is None]  # fmt: skip
    if missing:
        return (f"{', '.join(missing)} not installed (make test runs tests/install_slurm.sh, "
                "which needs root)")  # fmt: skip
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


def _munge_works() -> bool:
    munge = _tool("munge")
    if munge is None:
        return False
    return subprocess.run([munge, "-n"], capture_output=True).returncode == 0


class LocalSlurm:
    """The cluster; a context manager. ``root``: its folder (created, left in place)."""

    def __init__(self, root: Path, *, memory_mb: int = 4000):
        self.root = Path(root)
        self.memory_mb = min(memory_mb, _memory_mb())
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._started_munge = False
        self._procs: list[Path] = []  # pid files of the daemons started

    def config_text(self) -> str:
        ctld, *ports = _free_ports(1 + len(NODES))
        r = self.root
        lines = [
            "ClusterName=dsbench-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld}",
            "AuthType=auth/munge",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/slurmctld.log",
            f"SlurmdLogFile={r}/slurmd-%n.log",
            "SlurmUser=root",
            "SlurmdUser=root",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            "MinJobAge=600",  # finished jobs stay visible to scontrol show job
            "KillWait=5",
        ]
        host = socket.gethostname()
        for node, port in zip(NODES, ports, strict=True):
            lines.append(f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname={host} Port={port} "
                         f"CPUs={CPUS_PER_NODE} RealMemory={self.memory_mb}")  # fmt: skip
        lines.append(f"PartitionName=debug Nodes={','.join(NODES)} Default=YES "
                     "MaxTime=INFINITE State=UP")  # fmt: skip
        return "\n".join(lines) + "\n"

    def __enter__(self) -> LocalSlurm:
        why = unavailable()
        if why:
            raise RuntimeError(why)
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self.config_text())
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        if not _munge_works():
            run_dir = Path("/run/munge")
            run_dir.mkdir(parents=True, exist_ok=True)
            shutil.chown(run_dir, "munge", "munge")
            subprocess.run(["runuser", "-u", "munge", "--", _tool("munged")], check=True)
            self._started_munge = True
            self._wait(_munge_works, "munged did not answer")
        subprocess.run([_tool("slurmctld"), "-i"], env=self.env, check=True)
        self._procs.append(self.root / "slurmctld.pid")
        for node in NODES:
            subprocess.run([_tool("slurmd"), "-N", node], env=self.env, check=True)
            self._procs.append(self.root / f"slurmd-{node}.pid")
        self._wait(lambda: self.idle_nodes() == set(NODES), "the nodes did not become idle")

    def _wait(self, ready, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-1500:] for p in sorted(self.root.glob("*.log")))
                raise RuntimeError(f"{what} in {timeout:g} s; logs:\n{logs}")
            time.sleep(0.3)

    def idle_nodes(self) -> set[str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
        return {n for n, state in (line.split() for line in out.splitlines()) if state == "idle"}

    def run(self, *argv: str, check: bool = True, timeout: float = 120.0, env=None, **kw):
        """A Slurm command (``sbatch``, ``srun``, ...) against this cluster; ``env``: more
        variables for it."""
        return subprocess.run([_tool(argv[0]), *argv[1:]], env={**self.env, **(env or {})},
                              capture_output=True, text=True, check=check, timeout=timeout,
                              **kw)  # fmt: skip

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job``'s fields (JobState, ExitCode, NodeList, ...)."""
        out = self.run("scontrol", "-o", "show", "job", job_id).stdout
        return dict(f.split("=", 1) for f in out.split() if "=" in f)

    def close(self) -> None:
        pids = []
        for pid_file in reversed(self._procs):
            try:
                pids.append(int(pid_file.read_text()))
                os.kill(pids[-1], signal.SIGTERM)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 15
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self._procs.clear()
        if self._started_munge:
            subprocess.run(["pkill", "-x", "munged"], check=False)
            self._started_munge = False

    def __exit__(self, *exc) -> None:
        self.close()
