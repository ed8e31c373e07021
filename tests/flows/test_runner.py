"""Task runners: a temporary Dask cluster listens on loopback only, dashboard included."""

from __future__ import annotations

from pipeline.config import load_config


def test_temporary_dask_cluster_listens_on_loopback_only() -> None:
    from distributed import LocalCluster

    from flows.runner import task_runner

    cfg = load_config(profile="offline", overrides={"flow": {"task_runner": "dask"}})
    runner = task_runner(cfg)
    kwargs = dict(runner.cluster_kwargs, n_workers=0)  # the scheduler side is what listens
    with LocalCluster(**kwargs) as cluster:
        assert cluster.scheduler.address.startswith("tcp://127.0.0.1:")
        http = cluster.scheduler.http_server
        bound = [sock.getsockname()[0] for sock in http._sockets.values()]
        assert bound and set(bound) == {"127.0.0.1"}, bound
        assert cluster.dashboard_link.startswith("http://127.0.0.1:")
