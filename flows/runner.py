"""Task runners and Prefect settings for wikidrift's flows.

Prefect runs the flows on an ephemeral local server: no Prefect server or cloud to set up.
The settings below keep it quiet and reliable on a small machine (measured: telemetry tries
the network, and the server's default start timeout is too short on 2 cores).
"""

from __future__ import annotations

import os
from typing import Any

from pipeline.config import Config

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
    "PREFECT_LOGGING_LEVEL": "INFO",
}


def configure_prefect() -> None:
    """Set Prefect's environment defaults (the user's own settings win). Call before
    importing prefect."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


def task_runner(cfg: Config) -> Any:
    """Threads in this process (``flow.workers`` at a time), or Dask: an existing cluster at
    ``flow.dask_address`` or a temporary LocalCluster of ``flow.dask_workers`` processes."""
    if cfg.flow.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if cfg.flow.dask_address:
            return DaskTaskRunner(address=cfg.flow.dask_address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": cfg.flow.dask_workers,
                "processes": True,
                "threads_per_worker": 1,
            }
        )
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=cfg.flow.workers)
