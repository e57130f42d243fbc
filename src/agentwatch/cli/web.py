"""`agentwatch web`: the dashboard in a browser, one dashboard process per tab, signed in."""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys

from agentwatch import config
from agentwatch.cli.errors import CliError, missing_extra, require

DEFAULT_PORT = 8765
DEFAULT_MAX_SESSIONS = 4


def cmd_web(args: argparse.Namespace) -> int:
    require("web", "web", "textual_serve", "aiohttp", "textual", "nats", "orjson")
    from agentwatch.web.auth import TOKEN_FILE, TokenError, is_loopback, load_token, public_url

    if not is_loopback(args.host) and not args.public:
        raise CliError(
            f"--host {args.host} opens the dashboard to the network: add --public to mean it "
            "(with --tls-cert and --tls-key, or behind a TLS proxy)"
        )
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("--tls-cert and --tls-key go together")
    max_sessions = args.max_sessions or int(
        config.number(os.environ, "AGENTWATCH_WEB_MAX_SESSIONS", DEFAULT_MAX_SESSIONS)
    )
    if max_sessions < 1:
        raise CliError("--max-sessions must be 1 or more")
    path = args.token_file or os.path.join(config.config_dir(), TOKEN_FILE)
    try:
        token, made = load_token(path, create=args.token_file is None)
    except (TokenError, OSError) as exc:
        raise CliError(str(exc)) from None
    ssl_context = None
    if args.tls_cert:
        import ssl

        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            ssl_context.load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise CliError(f"cannot load --tls-cert/--tls-key: {exc}") from None
    url = args.public_url or public_url(args.host, args.port, ssl_context is not None, socket.gethostname())
    try:
        from agentwatch.web.server import DashboardServer
    except ImportError as exc:
        raise missing_extra(exc, "web", "web") from None
    command = shlex.join([sys.executable, "-m", "agentwatch", "tui"])
    server = DashboardServer(
        command, host=args.host, port=args.port, url=url, token=token, max_sessions=max_sessions,
        ssl_context=ssl_context,
    )  # fmt: skip
    if not is_loopback(args.host) and ssl_context is None:
        print(
            f"agentwatch web: WARNING: serving on {args.host} without TLS: the sign-in token and every "
            "screen cross the network in clear text; use --tls-cert/--tls-key or a TLS proxy",
            file=sys.stderr,
        )

    def announce() -> None:
        print(f"agentwatch web: the dashboard at {url} (up to {max_sessions} tabs at once)")
        print(f"sign in once, in each browser, at:\n  {url}/signin?token={token}")
        print(f"(the token is kept in {path}{', made now' if made else ''}; Ctrl+C stops)", flush=True)

    try:
        server.serve(announce=announce)
    except OSError as exc:
        raise CliError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror}; choose another --port"
        ) from None
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    web = sub.add_parser(
        "web",
        help="the dashboard in a browser, signed in",
        description="Serve the dashboard to browsers: each tab runs its own dashboard on this "
        "configuration's bus and store. Loopback only unless --public; a sign-in token guards every page.",
    )
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    web.add_argument("--public", action="store_true", help="allow an address other than loopback")
    web.add_argument("--public-url", help="the address browsers use, when not http(s)://HOST:PORT")
    web.add_argument(
        "--token-file", help="a file holding the sign-in secret (default: web-token in the config dir)"
    )
    web.add_argument(
        "--max-sessions",
        type=int,
        default=0,
        help=f"browser tabs at once (default AGENTWATCH_WEB_MAX_SESSIONS, else {DEFAULT_MAX_SESSIONS})",
    )
    web.add_argument("--tls-cert", help="certificate file: serve https")
    web.add_argument("--tls-key", help="key file for --tls-cert")
    web.set_defaults(func=cmd_web)
