"""A remoting producer and a 5.x gRPC producer of the same group answer the same group's checks: upstream's
``ProducerManager`` picks any live producer of the half's group, whatever protocol it came through. The
gRPC producer of topic ``orders`` is a producer of group ``orders`` (the 5.x proxy's rule), so is the
remoting producer that heartbeats with that group; halves the remoting producer leaves open are checked
by both in turn, and every answer commits."""

from __future__ import annotations

import json
import time
from pathlib import Path

from remotingkit import RemotingClient, served
from servekit import ClientProcess

from txmq.serve.remoting import codes
from txmq.serve.remoting.frame import Command

GROUP = "orders"  # the topic's name: the group its gRPC producers join
HALVES = 4


def half(client: RemotingClient, uniq: str) -> Command:
    props = f"UNIQ_KEY\x01{uniq}\x02TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02"
    return client.call(codes.SEND_MESSAGE_V2, {"a": GROUP, "b": "orders", "e": "0", "f": "4", "g": "0",
                                               "h": "0", "i": props}, uniq.encode())


def test_a_remoting_and_a_grpc_producer_of_one_group_both_answer_its_checks(tmp_path: Path) -> None:
    session = served(tmp_path / "store", "strict", {"orders": 1}, check_interval_ms=1000,
                     transaction_timeout_ms=1000)
    try:
        assert session.remoting is not None and session.broker is not None
        grpc = ClientProcess(f"127.0.0.1:{session.port}", tmp_path / "grpc")
        try:
            grpc.ok("producer", name="p", topics=["orders"])  # answers every check COMMIT
            remote = RemotingClient(session.remoting.port)
            heartbeat = {"clientID": "remote-1", "producerDataSet": [{"groupName": GROUP}]}
            assert remote.call(codes.HEART_BEAT, body=json.dumps(heartbeat).encode()).code == codes.SUCCESS
            txns = [f"MIX{i}" for i in range(HALVES)]
            for txn in txns:
                assert half(remote, txn).code == codes.SUCCESS
            deadline = time.monotonic() + 60
            answered = 0
            while time.monotonic() < deadline and any(
                    session.broker.transaction_state(t).name != "COMMITTED" for t in txns):
                while not remote.pushed.empty():
                    check = remote.pushed.get()
                    commit = {"producerGroup": GROUP, "commitOrRollback": "8", "fromTransactionCheck": "true"}
                    remote.oneway(codes.END_TRANSACTION, {**check.ext, **commit})
                    answered += 1
                time.sleep(0.1)
            assert [session.broker.transaction_state(t).name for t in txns] == ["COMMITTED"] * HALVES
            assert answered > 0 and sum(grpc.ok("checks")["checks"].values()) > 0
        finally:
            grpc.close()
    finally:
        session.stop()
