"""The web server: textual-serve runs one dashboard process per browser tab; this adds the sign-in,
the Host and Origin checks, the session limit, and the certain end of every dashboard process.

textual-serve's own server listens for anyone who can reach it. The checks are aiohttp middleware
on the application it builds: hand-written, because textual-serve has no authentication of its
own and aiohttp's session packages bring a cookie store this one fixed secret does not need. Its
websocket handler is replaced, to count the tabs and to run each dashboard as a
`session.DashboardProcess`, which ends when its tab's connection does however it ends, and when
the server does (`on_shutdown`; the kernel's parent-death signal when the server is killed).
"""

from __future__ import annotations

import asyncio
import html
import logging
import signal
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import WSCloseCode, web
from textual_serve.server import Server, to_int

from agentwatch.web.auth import COOKIE, allowed, cookie_matches, cookie_value, token_matches
from agentwatch.web.session import DashboardProcess

log = logging.getLogger("agentwatch.web")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Seconds between pings to each tab (textual-serve's own figure); a tab that sends no pong within
# half of it is taken for gone, which ends its dashboard.
HEARTBEAT = 15.0

# On every page: not framed by another site, not cached, no address (the sign-in one) in a Referer.
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


SIGN_IN = "Open the sign-in address `agentwatch web` printed when it started."

# Added to textual-serve's page, in its head. Keys reach the dashboard without a click first: the
# terminal takes them through xterm.js's hidden textarea, focused once it exists and again when the
# window comes back. The activity sparklines stay in their cells: xterm.js's WebGL renderer drew
# their block elements (▁▂▃▄▅▆▇█) as blocks running down across rows in Chromium; offered no WebGL
# context, xterm.js draws the screen as rows of text (its DOM renderer), each glyph in its row.
PAGE_SCRIPT = """<script>
(() => {
  const getContext = HTMLCanvasElement.prototype.getContext;
  HTMLCanvasElement.prototype.getContext = function (kind, ...rest) {
    return String(kind).startsWith("webgl") ? null : getContext.call(this, kind, ...rest);
  };
  const focus = () => {
    const keys = document.querySelector(".xterm-helper-textarea");
    if (keys && document.activeElement !== keys) keys.focus();
    return keys !== null;
  };
  window.addEventListener("load", () => {
    const timer = setInterval(() => focus() && clearInterval(timer), 100);
  });
  window.addEventListener("focus", focus);
})();
</script>
"""


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
        self.dashboards: dict[DashboardProcess, web.WebSocketResponse] = {}
        self.heartbeat = HEARTBEAT

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

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, with PAGE_SCRIPT in its head."""
        response = await super().handle_index(request)
        if isinstance(response, web.Response) and response.text is not None:
            response.text = response.text.replace("</head>", PAGE_SCRIPT + "</head>", 1)
        return response

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
        """One tab's dashboard, its own process, counted while it runs and refused past the limit.

        textual-serve's handler, with the process it starts ended for sure: the tab's connection
        ends however it ends (a close, a reset, no pong within half the heartbeat), then
        `DashboardProcess.stop` ends the dashboard, also when this handler is cancelled."""
        if self.sessions >= self.max_sessions:
            return self.full()  # type: ignore[return-value]  # aiohttp sends any response
        websocket = web.WebSocketResponse(heartbeat=self.heartbeat)

        async def close() -> None:  # the dashboard quit (textual-serve wants no result)
            await websocket.close()

        dashboard = DashboardProcess(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
            debug=self.debug,
        )
        self.dashboards[dashboard] = websocket  # counted from here: no await since the check
        try:
            await websocket.prepare(request)
            await dashboard.start(to_int(request.query.get("width", "80"), 80),
                                  to_int(request.query.get("height", "24"), 24))  # fmt: skip
            log.info(
                "dashboard opened (%d of %d): process %s", self.sessions, self.max_sessions, dashboard.pid
            )
            await self._process_messages(websocket, dashboard)
        except Exception:
            log.exception("dashboard process %s failed", dashboard.pid)
        finally:
            try:
                await dashboard.stop()
            finally:
                del self.dashboards[dashboard]
                log.info(
                    "dashboard closed (%d of %d): %s", self.sessions, self.max_sessions, dashboard.ended()
                )
        return websocket

    @property
    def sessions(self) -> int:
        return len(self.dashboards)

    async def on_shutdown(self, _app: web.Application) -> None:
        """Before aiohttp waits for the handlers: every tab told the server is going away, every
        dashboard ended (its handler, woken by the closed socket, waits for the same ending)."""
        open_now = list(self.dashboards.items())
        if open_now:
            log.info("stopping %d dashboard(s)", len(open_now))
        going = [ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping") for _, ws in open_now]
        await asyncio.gather(*going, return_exceptions=True)
        await asyncio.gather(*(dashboard.stop() for dashboard, _ in open_now), return_exceptions=True)

    # -- running -----------------------------------------------------------------------------

    def initialize_logging(self) -> None:
        """Plain lines on stderr (textual-serve's own set-up draws a banner with Rich)."""
        logging.basicConfig(level=logging.INFO, format="agentwatch web: %(message)s")
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def on_startup(self, app: web.Application) -> None:
        """The command prints the addresses; nothing more here."""

    def serve(self, debug: bool = False, announce: Callable[[], None] = lambda: None) -> None:
        """Serve until SIGINT, SIGTERM or SIGHUP (a closed terminal; not under nohup); the open
        dashboards are ended first (`on_shutdown`). `announce` runs once the server listens."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            loop.add_signal_handler(signal.SIGHUP, self.request_exit)
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
