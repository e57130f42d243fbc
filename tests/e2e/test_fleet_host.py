"""Host mode: `agentwatch up --hub` runs the host's bus as a leaf of the hub in a JetStream domain of
its own; the hook's events are acknowledged by the host's stream, whether the link is up or cut;
the hub sources every host that announces itself and stores each event once; `agentwatch hosts`
shows a cut link and the backlog it leaves; a host reads no other host's stream; `hosts forget`.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from agentwatch.bus import fleet as bus_fleet
from tests.conftest import bus_login
from tests.e2e.fleet import Host, Hub, RogueLeaf


@pytest.fixture(scope="module")
def hub_and_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hub, Host, Host]]:
    root = tmp_path_factory.mktemp("fleet")
    hub = Hub(root)
    hub.start()
    one, two = Host(root, "alpha", hub), Host(root, "beta.local", hub)
    try:
        one.wait_ready()
        two.wait_ready()
        yield hub, one, two
    finally:
        for host in (one, two):
            host.stop()
        hub.stop()


def wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout}s: {what}")


def test_each_host_is_sourced_and_each_event_stored_once(hub_and_hosts: tuple[Hub, Host, Host]) -> None:
    hub, one, two = hub_and_hosts
    one.emit(5)
    two.emit(3)
    hub.wait_count("alpha", 5, 30)
    hub.wait_count("beta.local", 3, 30)
    assert one.spooled() == 0 and two.spooled() == 0  # each acknowledged by its host's stream
    rows = hub.hosts()
    assert set(rows) == {"alpha", "beta.local"}
    assert rows["beta.local"]["domain"] == "beta-local"
    assert rows["alpha"]["link"] == "up" and rows["alpha"]["backlog"] == 0
    assert rows["alpha"]["events_1h"] >= 5 and rows["alpha"]["version"]


def test_prometheus_has_each_hosts_backlog_and_contact(hub_and_hosts: tuple[Hub, Host, Host]) -> None:
    hub, _, _ = hub_and_hosts
    url = f"http://{hub.env['AGENTWATCH_METRICS_ADDR']}/metrics"

    def scrape() -> str:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return str(answer.read().decode())

    wait_for(lambda: 'agentwatch_host_backlog{host="beta.local"} 0.0' in scrape(), 20, "beta's backlog gauge")
    text = scrape()
    assert 'agentwatch_host_backlog{host="alpha"} 0.0' in text
    assert 'agentwatch_host_seconds_since_contact{host="alpha"}' in text
    assert 'agentwatch_host_spool_bytes{host="alpha"} 0.0' in text


def test_a_cut_link_keeps_events_on_the_host_until_it_is_back(hub_and_hosts: tuple[Hub, Host, Host]) -> None:
    """The hub shows the host cut off; the host, which the hub told how far it had reached, shows
    its own backlog growing with each event while cut, and back to zero once the hub has them."""
    hub, one, _ = hub_and_hosts
    before = hub.count("alpha")[0]
    wait_for(lambda: one.own()["link"] == "up", 20, "alpha told by the hub")
    one.link.cut()
    wait_for(lambda: hub.hosts()["alpha"]["link"] == "cut", 20, "alpha shown cut off")
    wait_for(lambda: one.own()["link"] == "cut", 20, "alpha sees itself cut off")
    start = one.own()["backlog"]
    one.emit(10)
    middle = one.own()
    one.emit(10)
    assert one.spooled() == 0  # the host's own stream acknowledged every run
    end = one.own()
    assert (middle["backlog"], end["backlog"]) == (start + 10, start + 20), (start, middle, end)
    assert end["backlog_measured"] and end["oldest_waiting_s"] is not None and end["last_event"], end
    assert hub.count("alpha")[0] == before  # nothing crossed the cut link
    one.link.restore()
    hub.wait_count("alpha", before + 20, 40)
    wait_for(lambda: hub.hosts()["alpha"]["link"] == "up", 20, "alpha back")
    row = hub.hosts()["alpha"]
    assert row["backlog"] == 0 and row["backlog_measured"], row
    wait_for(lambda: one.own()["backlog"] == 0 and one.own()["link"] == "up", 20, "alpha's own backlog gone")


def test_a_host_reads_no_other_hosts_stream(hub_and_hosts: tuple[Hub, Host, Host]) -> None:
    _, one, two = hub_and_hosts

    async def read(url: str, domain: str) -> str:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream(domain=domain, timeout=2.0)
            try:
                info = await js.stream_info("GENIE")
            except Exception as exc:
                return type(exc).__name__
            return f"read {info.state.messages} messages"
        finally:
            await nc.close()

    # Its own stream, with its own store login: readable; the other host's, through the hub: no answer.
    own = asyncio.run(read(bus_login(one.env, "store"), "alpha"))
    assert own.startswith("read"), own
    other = asyncio.run(read(bus_login(one.env, "store"), "beta-local"))
    assert not other.startswith("read"), other
    assert asyncio.run(read(bus_login(two.env, "store"), "beta-local")).startswith("read")


def test_a_hosts_login_hears_the_hubs_requests_for_its_own_domain_alone(
    hub_and_hosts: tuple[Hub, Host, Host], tmp_path: Path
) -> None:
    """Alpha's leaf login in the wrong hands (a nats-server of one's own making, joined to the hub
    with it): through the hub it hears the hub's JetStream requests for alpha, never those for
    beta, so it can neither read nor answer for another host."""
    hub, one, _ = hub_and_hosts
    rogue = RogueLeaf(tmp_path, one.hub_url)
    heard: dict[str, int] = {"alpha": 0, "beta-local": 0}

    async def listen() -> None:
        nc = await nats.connect(rogue.url, max_reconnect_attempts=50, reconnect_time_wait=0.2)
        try:
            for domain in heard:

                async def count(_msg: object, domain: str = domain) -> None:
                    heard[domain] += 1

                await nc.subscribe(f"$JS.{domain}.API.>", cb=count)
            await nc.flush()
            await asyncio.sleep(3.0)  # the interest reaches the hub over the new leaf connection
            for _ in range(3):  # the hub asks each linked host's stream through its domain
                rows = await asyncio.to_thread(hub.hosts)
                assert rows["beta.local"]["backlog_measured"], rows["beta.local"]  # beta answered
                await asyncio.sleep(0.5)
        finally:
            await nc.close()

    try:
        asyncio.run(listen())
    finally:
        rogue.stop()
    assert heard["alpha"] > 0, "the rogue leaf never joined: the test saw nothing"
    assert heard["beta-local"] == 0, f"alpha's login heard {heard['beta-local']} requests meant for beta"


def test_forget_stops_sourcing_a_host(hub_and_hosts: tuple[Hub, Host, Host], tmp_path: Path) -> None:
    hub, _, two = hub_and_hosts
    from tests.conftest import run_cli

    gone = run_cli("hosts", "forget", "nobody", env=hub.env)
    assert gone.returncode == 1 and "no host nobody" in gone.stderr
    two.service.stop()  # it went away for good: no more announcements
    done = run_cli("hosts", "forget", "beta.local", env=hub.env)
    assert done.returncode == 0, done.stderr
    assert "beta.local" not in hub.hosts()

    async def sourced() -> set[str]:
        nc = await nats.connect(bus_login(hub.env, "store"))
        try:
            return await bus_fleet.sourced_domains(nc.jetstream())
        finally:
            await nc.close()

    assert asyncio.run(sourced()) == {"alpha"}
