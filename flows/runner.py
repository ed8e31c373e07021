"""Task runners and Prefect settings for wikidrift's flows.

Prefect runs the flows on an ephemeral local server: no Prefect server or cloud to set up.
The settings below keep it quiet and reliable on a small machine (measured: telemetry tries
the network, and the server's default start timeout is too short on 2 cores).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import Config

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
    "PREFECT_LOGGING_LEVEL": "INFO",
}


def configure_prefect(log_path: Path | None = None) -> Path | None:
    """Set Prefect's environment defaults (the user's own settings win). With ``log_path``,
    Prefect's console output (flow and task states, the temporary server, tracebacks) goes to
    that file instead, unless the user set ``PREFECT_LOGGING_SETTINGS_PATH``; returns the file
    the logs go to. Call before importing prefect."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if log_path is None or "PREFECT_LOGGING_SETTINGS_PATH" in os.environ:
        return None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    settings = log_path.with_name("prefect-logging.yml")
    settings.write_text(yaml.safe_dump(_file_logging(log_path), sort_keys=False))
    os.environ["PREFECT_LOGGING_SETTINGS_PATH"] = str(settings)
    return log_path


def _file_logging(log_path: Path) -> dict[str, Any]:
    """Prefect's own logging settings with every console handler writing to ``log_path``."""
    spec = importlib.util.find_spec("prefect")
    folder = Path(list(spec.submodule_search_locations or [])[0]) if spec else None
    if folder is None:
        raise RuntimeError("prefect is not installed")
    config = yaml.safe_load((folder / "logging" / "logging.yml").read_text())
    to_file = {
        "level": 0,
        "class": "logging.FileHandler",
        "filename": str(log_path),
        "encoding": "utf-8",
    }
    config["handlers"]["console"] = to_file | {"formatter": "standard"}
    config["handlers"]["debug"] = to_file | {"formatter": "debug"}
    return config


def task_runner(cfg: Config) -> Any:
    """Threads in this process (``flow.workers`` at a time), or Dask: an existing cluster at
    ``flow.dask_address`` or a temporary LocalCluster of ``flow.dask_workers`` processes,
    listening (dashboard included) on 127.0.0.1 only."""
    if cfg.flow.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if cfg.flow.dask_address:
            return DaskTaskRunner(address=cfg.flow.dask_address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": cfg.flow.dask_workers,
                "processes": True,
                "threads_per_worker": 1,
                # Scheduler, workers and dashboard on loopback only: the dashboard's default
                # (0.0.0.0:8787) shows every task's arguments, the config included, to the
                # network. Another free port is taken when 8787 is busy.
                "host": "127.0.0.1",
                "dashboard_address": "127.0.0.1:8787",
            }
        )
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=cfg.flow.workers)
