"""The throwaway PostgreSQL server: rows go in and come back, over a loopback port that takes
only its password, and the port closes when it stops. No JVM: in `make test-fast` too.

This folder has no __init__.py: as a package it would be imported as `devkit.test_postgres`,
inside the real `devkit`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from devkit import postgres
from devkit.postgres import Postgres, available


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Postgres]:
    reason = available()
    if reason:
        pytest.fail(reason)  # not a skip: a machine without the packages should be fixed
    with Postgres(tmp_path) as server:
        yield server


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as the kernel lists them) of TCP sockets listening on `port`."""
    found = []
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        lines = table.read_text().splitlines()[1:] if table.exists() else []  # tcp6: none without IPv6
        for line in lines:
            _, local, _, state, *_ = line.split()
            address, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                found.append(address)
    return found


def _refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_round_trip(pg: Postgres) -> None:
    with pg.connect() as con:
        con.execute("create table items (id int primary key, name text)")
        with con.cursor() as cur:
            cur.executemany("insert into items values (%s, %s)", [(1, "a"), (2, "b"), (3, None)])
        assert con.execute("select id, name from items order by id").fetchall() == [(1, "a"), (2, "b"), (3, None)]
    assert pg.jdbc_options() == {
        "url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{pg.database}",
        "user": pg.user,
        "password": pg.password,
        "driver": "org.postgresql.Driver",
    }


def test_password_required(pg: Postgres) -> None:
    for password in ("wrong", ""):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host=pg.host, port=pg.port, user=pg.user, password=password, dbname=pg.database)


def test_loopback_only_and_closed_at_stop(pg: Postgres) -> None:
    assert _listening(pg.port) == ["0100007F"]  # 127.0.0.1: no wildcard, no IPv6
    assert _refused("127.0.0.2", pg.port)  # another loopback address is not listened on either
    pg.stop()
    assert _refused("127.0.0.1", pg.port)
    assert _listening(pg.port) == []
    pg.stop()  # again, as the fixture's block does: nothing to do


def test_failure_shows_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:  # the port the server is given is in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(postgres, "_free_port", lambda: taken.getsockname()[1])
        with pytest.raises(RuntimeError, match=r"(?s)pg_ctl failed.*postgres\.log ends:.*could not bind"):
            Postgres(tmp_path)
