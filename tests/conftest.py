"""Shared fixtures: one local SparkSession for the whole run and small TPC-H data, the
standalone cluster's run in the background; the test tiers (which tests start a JVM) and
the Hypothesis profiles."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import settings
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as RemoteSession

import ember.connect
from devkit import connect, postgres
from devkit import tpch as tpch_data
from tests.oracle.tpch_lineage import oracle
from tests.tpch.queries_sql import tpch_sql

ROOT = Path(__file__).resolve().parents[1]
TPCH_SCALE = 0.01

# Test tiers. `make test` runs everything; `make test-fast` runs `pytest -m "not jvm"`: every
# test that starts no JVM and needs neither Chromium nor the TPC-DS data (and it runs them with
# a `java` that refuses to start, so a test that starts Spark unmarked fails there). A test is
# marked `jvm` below when its fixture closure (the fixtures it asks for, and theirs, and so on)
# holds one of these; the few modules that start Spark with no fixture (a job in a subprocess)
# say `pytestmark = pytest.mark.jvm` themselves.
JVM_FIXTURES = frozenset(
    {
        "spark",  # the run's local SparkSession, and all that is built on it (tpch, lc, ui_app, ...)
        "cluster",  # tests/capture/test_cluster.py: a standalone master and two workers (spark-class)
        "page",  # tests/ui/test_page.py: the page in headless Chromium (make chromium)
        "browser",  # a Playwright browser, should a test ask for one by that name
        "tpcds_dir",  # tests/tpcds: the TPC-DS data (make tpcds), read only with Spark
        "connect_server",  # a Spark Connect server with ember's plugin (its own JVM)
    }
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if JVM_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.jvm)
    # the cluster's tests last, so that its run (`cluster_run`) has the whole session to overlap
    items.sort(key=_on_the_cluster)


CLUSTER_TESTS = ROOT / "tests" / "capture" / "test_cluster.py"


def _on_the_cluster(item: pytest.Item) -> bool:
    return item.path == CLUSTER_TESTS


@pytest.fixture(scope="session", autouse=True)
def cluster_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[Path] | None]:
    """The standalone cluster's run for tests/capture/test_cluster.py (its stores), started
    in the background when the session begins, if a test there is selected (None if not).
    Its minutes (about 200 s alone: JVMs started, killed and replaced, on one core per
    executor) overlap the other tests instead of adding to them; the session's end waits
    for it."""
    if not any(map(_on_the_cluster, request.session.items)):
        yield None
        return
    # here, not at the top: that module imports this one
    from tests.capture.test_cluster import captured_on_a_cluster

    tpch = request.getfixturevalue("tpch_dir")  # asked only here: the fast tier may have no data
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(captured_on_a_cluster, tmp_path_factory, tpch)


# Hypothesis profiles, chosen by HYPOTHESIS_PROFILE (or pytest's --hypothesis-profile); with
# neither, `ci` when the CI variable is set (CI=true) and `dev` otherwise. Tests give no
# `max_examples` of their own: the profile decides. A test whose every example runs a Spark
# job takes its settings from the profile "spark-jobs" instead,
#     @settings(settings.get_profile("spark-jobs"), deadline=None, ...)
# which is the chosen profile with the fewer examples SPARK_JOB_EXAMPLES gives (those tests
# had 20 to 60 examples before the profiles, the plain ones 20 to 300). `ci` is Hypothesis's
# own `ci` profile (derandomized, no deadline, no example database, failures printed as
# blobs), which it loaded by itself under CI before these profiles, with its example counts.
settings.register_profile("dev", settings.get_profile("default"), max_examples=10)  # make test-fast
settings.register_profile("ci", settings.get_profile("ci"), max_examples=100)
settings.register_profile(  # bug hunting: slow, and failures stay in .hypothesis/ to replay
    "hunt", settings.get_profile("default"), max_examples=2000, deadline=None, print_blob=True
)
SPARK_JOB_EXAMPLES = {"dev": 3, "ci": 25, "hunt": 200}
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI", "").lower() not in {"", "0", "false", "no"} else "dev"
)


def pytest_configure(config: pytest.Config) -> None:
    # Loaded here, not at import: test modules import this file again as `tests.conftest`.
    name = config.getoption("hypothesis_profile", None) or PROFILE
    settings.load_profile(name)
    base = settings.get_profile(name)
    examples = SPARK_JOB_EXAMPLES.get(name, max(1, base.max_examples // 4))
    settings.register_profile("spark-jobs", base, max_examples=examples)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = tpch_data.local_spark(
        "ember-tests",
        **{
            "spark.default.parallelism": "4",
            "spark.driver.memory": "4g",
            "spark.sql.session.timeZone": "UTC",
            "spark.jars": postgres.JDBC_JAR,  # PostgreSQL's JDBC driver (make postgres): tests/capture/test_keyed.py
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def tpch_dir() -> Path:
    """TPC-H Parquet at a small scale, one file per table (generated once, cached under data/)."""
    path = Path(os.environ.get("EMBER_TPCH", ROOT / "data" / "tpch" / f"sf{TPCH_SCALE}"))
    tpch_data.ensure_data(path, TPCH_SCALE)
    return path


@pytest.fixture(scope="session")
def tpch(spark: SparkSession, tpch_dir: Path) -> Path:
    """Registers the eight TPC-H tables as temp views named after the tables."""
    tpch_data.register(spark, tpch_dir)
    return tpch_dir


@pytest.fixture(scope="session")
def lineage_duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    yield con
    con.close()


@pytest.fixture(scope="session")
def tpch_oracle(lineage_duck: duckdb.DuckDBPyConnection, tpch: Path) -> Callable[[int], pa.Table]:
    """Query number → the oracle's table (computed once per session)."""
    cache: dict[int, pa.Table] = {}

    def get(n: int) -> pa.Table:
        if n not in cache:
            cache[n] = oracle(lineage_duck, tpch, n)
        return cache[n]

    return get


@pytest.fixture(scope="session")
def tpch_plain(spark: SparkSession, tpch: Path) -> Callable[[int], pa.Table]:
    """Query number → its SQL text's output on the classic session, run once per session:
    what every capture of the query must return, in the DataFrame API too, over Connect too."""
    return functools.cache(lambda n: tpch_sql(spark, n).toArrow())


@pytest.fixture(scope="session")
def table_rows(tpch: Path) -> dict[str, int]:
    return {
        t: pq.ParquetFile(tpch / f"{t}.parquet").metadata.num_rows
        for t in ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
    }


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server with ember's settings, started once for the run: its URL, token included."""
    jars = f"{ember.connect.server_conf()['spark.jars']},{postgres.JDBC_JAR}"  # tests/capture/test_keyed.py over Connect
    with connect.server(tmp_path_factory.mktemp("connect") / "server.log", **{"spark.jars": jars}) as url:
        yield url


@pytest.fixture(scope="session")
def remote(connect_server: str, tpch: Path) -> Iterator[RemoteSession]:
    # Connect's own builder: the generic one refuses a remote session beside this process's classic one
    session = RemoteSession.builder.remote(connect_server).getOrCreate()
    tpch_data.register(session, tpch)  # type: ignore[arg-type]
    yield session
    session.stop()
