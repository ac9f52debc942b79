"""The per-rank map as Ray tasks: one task reads one rank file and returns its `RankTrace`.

Ray is optional (`pip install 'tpscope[ray]'`) and imported only here, only when
`--engine ray` is asked for. The rank files must be at a location every worker sees: a shared
filesystem path or an fsspec URL (`run_folder.py`). The cross-rank reduce (ordering the ranks,
then `tpscope.metrics.analyze_run`) stays on the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tpscope.errors import UserError

Progress = Callable[[int, int], None]  # (ranks done, ranks in all)
RAY_CONNECT_TIMEOUT_S = 10.0  # a cluster's head answers a TCP connection at once


def check_address(address: str | None, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """One line naming `address` when nothing accepts a connection at its host and port within
    `timeout_s` (Ray alone retries such an address for minutes). `auto` and no address (a local
    cluster) are left to Ray."""
    import socket

    if not address or address == "auto":
        return
    where = address.removeprefix("ray://").rstrip("/")
    host, sep, port = where.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        return  # a form Ray reads itself (a host alone takes its default port)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except (OSError, OverflowError, ValueError) as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else getattr(exc, "strerror", None)
        raise UserError(
            f"--address {address}: no Ray cluster answers at {host}:{port} "
            f"({why or exc}; waited up to {timeout_s:g} s)"
        ) from None


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--engine ray: Ray is not installed (pip install 'tpscope[ray]')") from None
    return ray


def map_ray(
    function: Callable,
    jobs: Sequence,
    address: str | None = None,
    progress: Progress | None = None,
    cpus_per_task: float = 1,
) -> list:
    """`function(job)` for every job as Ray tasks (`cpus_per_task` CPUs each: one by default),
    results in job order.

    Connects to the cluster at `address` (`ray://...`, `host:port` or "auto"), or starts a local
    one when `address` is None and this process has none yet; a cluster this call started is
    shut down at the end.
    """
    ray = _ray()
    check_address(address)
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                logging_level="ERROR",
                configure_logging=False,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = address or "a local cluster"
            raise UserError(
                f"--address {where}: cannot connect to Ray ({str(exc).splitlines()[0]})"
            ) from None
    try:
        task = ray.remote(num_cpus=cpus_per_task, max_retries=1)(function)
        refs = [task.remote(job) for job in jobs]
        position = {ref: k for k, ref in enumerate(refs)}
        results: list = [None] * len(refs)
        pending, done_count = refs, 0
        while pending:
            done, pending = ray.wait(pending, num_returns=1, fetch_local=True)
            for ref in done:
                results[position[ref]] = ray.get(ref)
                done_count += 1
            if progress is not None:
                progress(done_count, len(refs))
        return results
    finally:
        if started:
            ray.shutdown()
