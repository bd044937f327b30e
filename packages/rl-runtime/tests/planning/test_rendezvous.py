"""The master-address rendezvous: a free port, the file and Ray-actor exchanges, and their timeouts."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from rl_runtime.planning._errors import RendezvousTimeout
from rl_runtime.planning._ray_rendezvous import ActorRendezvous
from rl_runtime.planning._rendezvous import (
    LOCALHOST,
    FileRendezvous,
    RendezvousAddress,
    free_port,
    rendezvous,
)


def test_free_port_can_be_bound() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind((LOCALHOST, port))


def test_init_method() -> None:
    assert RendezvousAddress("127.0.0.1", 29500).init_method == "tcp://127.0.0.1:29500"


def test_file_rendezvous_rank_zero_publishes_and_the_others_read(tmp_path: Path) -> None:
    exchange = FileRendezvous(tmp_path / "master.json")
    got: list[RendezvousAddress] = []
    waiter = threading.Thread(target=lambda: got.append(rendezvous(1, exchange, timeout_s=30)))
    waiter.start()  # rank 1 waits before rank 0 has published
    published = rendezvous(0, exchange, timeout_s=30)
    waiter.join(timeout=30)
    assert published.host == LOCALHOST and got == [published]
    assert [p.name for p in tmp_path.iterdir()] == ["master.json"]  # no partial file left behind


def test_file_rendezvous_timeout(tmp_path: Path) -> None:
    with pytest.raises(RendezvousTimeout, match=r"did not publish the master address in .*nothing\.json within 0\.1 s"):
        FileRendezvous(tmp_path / "nothing.json").wait(0.1)


@pytest.mark.usefixtures("ray_runtime")
def test_actor_rendezvous() -> None:
    exchange = ActorRendezvous.start()
    exchange.publish(RendezvousAddress(LOCALHOST, 12345))
    assert exchange.wait(10) == RendezvousAddress(LOCALHOST, 12345)


@pytest.mark.usefixtures("ray_runtime")
def test_actor_rendezvous_timeout() -> None:
    with pytest.raises(
        RendezvousTimeout, match=r"did not publish the master address to the rendezvous actor within 0\.2"
    ):
        ActorRendezvous.start().wait(0.2)
