"""``trainium-lens explorer RUN_ID [--line N]``: open a run in Neuron Explorer."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import webbrowser

from trainium_lens.cli.common import add_run_arguments
from trainium_lens.cli.refs import resolve
from trainium_lens.hosttools.explorer.service import ExplorerService, describe
from trainium_lens.hosttools.explorer.settings import DEFAULT_URL_TEMPLATE, ExplorerSettings
from trainium_lens.model.ranks import rank_result


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "explorer",
        help="open a Trainium run in Neuron Explorer (through an SSH tunnel)",
        description="Start `neuron-explorer view` on the run's host if it is not serving, "
        "ingest the run's Neuron profile once, forward the UI and API ports to "
        "127.0.0.1 here, and open the run's page. The tunnel stays open until "
        "Ctrl-C.",
    )
    add_run_arguments(p)
    p.add_argument(
        "--line",
        type=int,
        metavar="N",
        help="the source line (1-based) whose time window fills the URL template",
    )
    p.add_argument(
        "--rank",
        type=int,
        metavar="K",
        help="a torchrun run (--nproc): open rank K's profile (default: rank 0)",
    )
    p.add_argument(
        "--explorer-path",
        metavar="PATH",
        default="",
        help="neuron-explorer on the host (default: PATH, then /opt/aws/neuron/bin)",
    )
    d = ExplorerSettings()
    ports = (
        ("--ui-port", "ui_port", "Explorer's UI port on the host", ""),
        ("--api-port", "api_port", "Explorer's API port on the host", ""),
        ("--local-ui-port", "local_ui_port", "local end of the UI forward", ""),
        (
            "--local-api-port",
            "local_api_port",
            "local end of the API forward",
            "; the UI calls the API on this port, keep it equal to --api-port",
        ),
    )
    for flag, name, what, note in ports:
        default = getattr(d, name)
        p.add_argument(
            flag, type=int, default=default, metavar="PORT", help=f"{what} (default {default}{note})"
        )
    p.add_argument(
        "--url-template",
        default=DEFAULT_URL_TEMPLATE,
        metavar="TEMPLATE",
        help="the page URL, with {port}, {profile}, {start_ns}, {end_ns} "
        "(Explorer's deep-link parameters are undocumented)",
    )
    p.add_argument("--no-browser", action="store_true", help="print the URL, do not open it")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    result = resolve(args.run, args.workspace)
    if args.rank is not None:
        result = rank_result(result, args.rank)
    settings = ExplorerSettings(
        ui_port=args.ui_port,
        api_port=args.api_port,
        local_ui_port=args.local_ui_port,
        local_api_port=args.local_api_port,
        url_template=args.url_template,
        binary=args.explorer_path,
        ssh_config=args.ssh_config,
    )
    service = ExplorerService(settings)
    try:
        opened = service.open(result, args.line)
        print(describe(opened), file=sys.stderr)
        if opened.window_ns:
            print(
                f"line {args.line}: trace time {opened.window_ns[0]}–{opened.window_ns[1]} ns",
                file=sys.stderr,
            )
        print(opened.url, flush=True)
        if not args.no_browser:
            webbrowser.open(opened.url)
        if opened.tunnel == "none":
            return 0
        print("tunnel open on 127.0.0.1; press Ctrl-C to close it", file=sys.stderr, flush=True)
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        try:
            while not done.wait(1.0):
                if not all(t.alive() for t in service.tunnels()):
                    print("trainium-lens: the tunnel closed", file=sys.stderr)
                    return 4
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        service.close()
