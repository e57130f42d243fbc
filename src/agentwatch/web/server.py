"""The web server: textual-serve runs one dashboard process per browser tab; this adds the sign-in,
the Host and Origin checks and the session limit around it.

textual-serve's own server listens for anyone who can reach it. The checks are aiohttp middleware
on the application it builds, and a wrapper around its websocket handler: hand-written, because
textual-serve has no authentication of its own and aiohttp's session packages bring a cookie
store this one fixed secret does not need.
"""

from __future__ import annotations

import asyncio
import html
import logging
import signal
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from textual_serve.server import Server

from agentwatch.web.auth import COOKIE, allowed, cookie_matches, cookie_value, token_matches

log = logging.getLogger("agentwatch.web")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# On every page: not framed by another site, not cached, no address (the sign-in one) in a Referer.
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


SIGN_IN = "Open the sign-in address `agentwatch web` printed when it started."


def page(status: int, title: str, text: str) -> web.Response:
    """A short HTML page that says what happened and what to do."""
    body = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>agentwatch: "
        f"{html.escape(title)}</title></head><body style='font-family: monospace; margin: 3em'>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>"
    )
    return web.Response(status=status, text=body, content_type="text/html", headers=SECURITY_HEADERS)


class DashboardServer(Server):
    """textual-serve's server, signed in and bounded."""

    def __init__(
        self,
        command: str,
        *,
        host: str,
        port: int,
        url: str,
        token: str,
        max_sessions: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(command, host=host, port=port, title="agentwatch", public_url=url)
        self.token = token
        self.max_sessions = max_sessions
        self.ssl_context = ssl_context
        self.hosts, self.origins = allowed(url)
        # Browsers keep cookies per host, not per port: one name per port, so that signing in to a
        # second server on this machine does not sign the browser out of the first.
        self.cookie = f"{COOKIE}_{port}"
        self.sessions = 0

    # -- the checks --------------------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.router.add_get("/signin", self.handle_signin)

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            return await self.guard(request, handler)

        app.middlewares.append(guard)
        return app

    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every request: the right Host, no foreign Origin, signed in; the index within the limit."""
        if request.host not in self.hosts:
            names = ", ".join(sorted(self.hosts))
            return page(421, "Wrong address", f"This dashboard answers at {names} only: open it there.")
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self.origins:
            log.warning("refused a request from another site's page (Origin %s)", origin)
            return page(403, "Refused", "A page of another site asked this dashboard for something.")
        if request.path != "/signin" and not cookie_matches(request.cookies.get(self.cookie, ""), self.token):
            return page(401, "Sign in first", SIGN_IN)
        if request.path == "/" and self.sessions >= self.max_sessions:
            return self.full()
        response = await handler(request)
        if not isinstance(response, web.WebSocketResponse) and not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    def full(self) -> web.Response:
        return page(
            503,
            "Too many dashboards open",
            f"{self.max_sessions} browser tabs have a dashboard open already, each its own process. "
            "Close one and reload this page, or start `agentwatch web --max-sessions N` "
            "(AGENTWATCH_WEB_MAX_SESSIONS) for more.",
        )

    async def handle_signin(self, request: web.Request) -> web.StreamResponse:
        if not token_matches(request.query.get("token", ""), self.token):
            return page(401, "Wrong token", SIGN_IN)
        response = web.Response(status=303, headers={"Location": "/", **SECURITY_HEADERS})
        response.set_cookie(
            self.cookie,
            cookie_value(self.token),
            httponly=True,
            samesite="Strict",
            secure=self.ssl_context is not None,
        )
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One tab's dashboard: counted while it runs, refused past the limit."""
        if self.sessions >= self.max_sessions:
            return self.full()  # type: ignore[return-value]  # aiohttp sends any response
        self.sessions += 1
        log.info("dashboard opened (%d of %d)", self.sessions, self.max_sessions)
        try:
            return await super().handle_websocket(request)
        finally:
            self.sessions -= 1
            log.info("dashboard closed (%d of %d)", self.sessions, self.max_sessions)

    # -- running -----------------------------------------------------------------------------

    def initialize_logging(self) -> None:
        """Plain lines on stderr (textual-serve's own set-up draws a banner with Rich)."""
        logging.basicConfig(level=logging.INFO, format="agentwatch web: %(message)s")
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def on_startup(self, app: web.Application) -> None:
        """The command prints the addresses; nothing more here."""

    def serve(self, debug: bool = False, announce: Callable[[], None] = lambda: None) -> None:
        """Serve until SIGINT or SIGTERM; open dashboards are told to quit first. `announce` runs
        once the server listens."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        web.run_app(
            self._make_app(),
            host=self.host,
            port=self.port,
            ssl_context=self.ssl_context,
            handle_signals=False,
            loop=loop,
            print=lambda *_: announce(),
            access_log=None,
        )
