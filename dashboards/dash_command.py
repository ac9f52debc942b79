"""`tpscope dash [RUN_DIR ...] [--host 127.0.0.1] [--port 8050]`: the dashboard on run folders."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"  # loopback only unless --host says otherwise
DEFAULT_PORT = 8050


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run folders, or folders of runs (one subfolder each), to serve (default: the bundled "
        "sample runs); only these are served",
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to bind (default {DEFAULT_HOST}: this machine only)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where parsed runs are cached (default $TPSCOPE_CACHE_DIR, else "
        "$XDG_CACHE_HOME/tpscope, else ~/.cache/tpscope)",
    )
    p.add_argument("--no-cache", action="store_true", help="read every run afresh; write no cache")


def resolve_run_dirs(given: list[str]) -> list[Path]:
    """The folders to serve: those given (each must exist), else the bundled sample runs."""
    from tpscope.errors import UserError
    from tpscope.samples import default_run, sample_runs

    if not given:
        runs = sample_runs()
        # default_run() raises the clear "none bundled" error
        return runs if runs else [default_run()]
    from tpscope.trace import find_runs

    paths = []
    for p in map(Path, given):
        if not p.exists():
            raise UserError(f"{p}: no such file or folder")
        paths += find_runs(p) or [p]  # a folder of runs (one subfolder each) serves each of them
    return paths


def check_port_free(host: str, port: int) -> None:
    from tpscope.errors import UserError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # as the server itself binds (werkzeug sets SO_REUSEADDR): a port whose last connections
        # are in TIME_WAIT after Ctrl-C is free to listen on, one with a live listener is not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UserError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); pass --port"
            ) from None


def build_app(run_dirs: list[str], cache_dir: str | None = None, use_cache: bool = True):
    """The app over the given folders, or over the sample runs opened on `sample_traces/DEFAULT`."""
    from tpscope.dashboards.app import create_app
    from tpscope.samples import default_run

    runs = resolve_run_dirs(run_dirs)
    first = None if run_dirs else default_run()
    return create_app(
        runs,
        cache_dir=Path(cache_dir) if cache_dir else None,
        use_cache=use_cache,
        default_run=first,
        read_ahead=True,  # the analysis runs while the browser loads the page
    ), runs


def main(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        from tpscope.errors import UserError

        raise UserError(f"--port {args.port}: not a port number")
    app, runs = build_app(args.run_dirs, args.cache_dir, not args.no_cache)
    from tpscope.dashboards.host_check import install_host_check

    install_host_check(app.server, args.host)  # Host must be one of our names: no DNS rebinding
    check_port_free(args.host, args.port)
    print(
        f"tpscope dash: serving {len(runs)} run folder(s) on http://{args.host}:{args.port}/ (Ctrl-C to stop)"
    )
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"tpscope dash: note: --host {args.host} lets anyone who can reach this port see these runs",
            file=sys.stderr,
        )
    quiet_server()
    app.run(host=args.host, port=args.port, debug=False)
    return 0


def quiet_server() -> None:
    """Leave out Dash's, Flask's and werkzeug's start-up lines ("Dash is running on ...", the red
    "development server" warning): the line above says where the page is; the server serves one
    person on this machine (127.0.0.1 unless --host says otherwise), the use werkzeug's server is
    made for."""
    import logging

    import flask.cli

    flask.cli.show_server_banner = lambda *args, **kwargs: None
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("dash.dash").setLevel(logging.WARNING)  # its INFO "Dash is running on"
