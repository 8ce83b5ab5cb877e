"""``txmq serve``'s options: user mistakes are one-line errors with their exit codes, nothing started;
``--advertise`` is what QueryRoute tells clients; the trace exists under its name only once finished."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.cli import main
from txmq.config import BrokerConfig
from txmq.errors import ConfigError, StoreLockedError

grpc = pytest.importorskip("grpc", reason="grpcio is missing: pip install -e '.[serve]'")
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc  # noqa: E402

from txmq.serve.config import ServeConfig  # noqa: E402
from txmq.serve.server import ServeSession  # noqa: E402


@pytest.mark.parametrize(("args", "says"), [
    ([], "declare the topics"),
    (["--topic", "T:0"], "--topic T:0"),
    (["--topic", "RMQ_SYS_TRANS_HALF_TOPIC"], "system topic"),
    (["--topic", "T", "--advertise", "nohost"], "--advertise nohost"),
    (["--topic", "T", "--trace", "trace.csv"], "*.parquet or *.ndjson"),
    (["--topic", "T", "--trace", "/no/such/dir/t.ndjson"], "does not exist"),
    (["--topic", "T", "--port", "70000"], "--port 70000"),
    (["--topic", "T", "--proxy", "nope=1"], "unknown proxy setting"),
    (["--topic", "T", "--broker", "check_max=0"], "check_max"),
])
def test_mistakes_are_one_line_errors(args: list[str], says: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    expected = 5 if "system" in says else 3  # ClientError for a topic name, ConfigError for the rest
    assert main(["serve", "--store", str(tmp_path / "store"), *args]) == expected
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "store").exists()


def test_query_route_gives_the_advertised_endpoint_and_the_trace_appears_at_stop(tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    session = ServeSession(tmp_path / "store", BrokerConfig(), ServeConfig(), {"T": 2}, port=0, trace=trace,
                           advertise=("mq.example.test", 9876)).start()
    try:
        assert not trace.exists() and len(list(tmp_path.glob(".t.parquet.*.tmp"))) == 1  # being written
        with grpc.insecure_channel(f"127.0.0.1:{session.port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")),
                                    metadata=[("x-mq-client-id", "cli-test")])
    finally:
        session.stop()
    assert [q.id for q in route.message_queues] == [0, 1]
    endpoints = route.message_queues[0].broker.endpoints
    assert endpoints.scheme == pb.AddressScheme.DOMAIN_NAME
    assert [(a.host, a.port) for a in endpoints.addresses] == [("mq.example.test", 9876)]
    assert trace.exists() and not list(tmp_path.glob("*.tmp"))


def test_a_busy_port_or_store_is_refused_and_leaves_no_trace(tmp_path: Path) -> None:
    first = ServeSession(tmp_path / "a", BrokerConfig(), ServeConfig(), {"T": 1}, port=0).start()
    try:
        trace = tmp_path / "t.ndjson"
        with pytest.raises(ConfigError, match="cannot listen"):
            ServeSession(tmp_path / "b", BrokerConfig(), ServeConfig(), {"T": 1}, port=first.port,
                         trace=trace).start()
        assert not (tmp_path / "b").exists()  # issue #25: the store directory was created before the bind
        with pytest.raises(StoreLockedError):
            ServeSession(tmp_path / "a", BrokerConfig(), ServeConfig(), {"T": 1}, port=0, trace=trace).start()
        assert list(tmp_path.glob("*t*.ndjson*")) == []
    finally:
        first.stop()
