"""The upstream cluster fixture itself: upstream serves a transaction end to end to the official client,
and ``txmq upstream`` refuses bad input in one line. (Its restarts are exercised where they matter: the
upstream-store import kills the broker with SIGKILL and reads the store after, and the audit's nemesis
kills broker and proxy under a workload whose deliveries it checks.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from servekit import ClientProcess

from txmq.cli import main
from txmq.errors import BrokerUnavailableError, ExitCode
from txmq.upstream import UpstreamCluster
from txmq.upstream.cluster import TOPIC_ATTEMPTS, disk_use


def _receive(client: ClientProcess, name: str, want: set[str], timeout_s: float = 60) -> set[str]:
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while not want <= seen and time.monotonic() < deadline:
        for message in client.ok("receive", consumer=name, max=16, invisible_s=20)["messages"]:
            seen.add(message["body"])
            client.ok("ack", consumer=name, handle=message["handle"])
    return seen


def test_upstream_commits_a_transaction_and_rolls_one_back(upstream: UpstreamCluster, tmp_path: Path) -> None:
    upstream.create_topic("fixture-tx", "TRANSACTION")
    client = ClientProcess(upstream.proxy_endpoint, tmp_path / "client")
    try:
        client.ok("producer", name="p", topics=["fixture-tx"])
        client.ok("consumer", name="c", group="fixture-group", topics=["fixture-tx"])
        rolled = client.ok("half", producer="p", topic="fixture-tx", body="rolled-back")
        # upstream may still check a half after its end (issue #22: a check re-committed a committed
        # message); the application's checker answers what it decided, not the client's default COMMIT
        client.ok("decide", message_id=rolled["message_id"], answers=["ROLLBACK"])
        client.ok("end", tx=rolled["message_id"], action="ROLLBACK")
        committed = client.ok("half", producer="p", topic="fixture-tx", body="committed")
        client.ok("end", tx=committed["message_id"], action="COMMIT")
        seen = _receive(client, "c", {"committed"})
        assert "committed" in seen and "rolled-back" not in seen
    finally:
        client.close()


@pytest.mark.parametrize("argv, message", [
    (["--home", "/nonexistent"], "is not a RocketMQ distribution"),
    (["--topic", "t:QUEUE"], "the message type is one of"),
    (["--broker", "novalue"], "write NAME=VALUE"),
])
def test_txmq_upstream_bad_input_is_one_line(argv: list[str], message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))  # a folder that is not a distribution
    for name in ("mqnamesrv", "mqbroker", "mqproxy", "mqadmin"):
        if "--home" not in argv:
            (tmp_path / "bin").mkdir(exist_ok=True)
            (tmp_path / "bin" / name).write_text("#!/bin/sh\nexit 1\n")
    code = main(["upstream", "--dir", str(tmp_path / "work"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and message in err[0], err


def test_txmq_upstream_without_rocketmq_home_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    assert main(["upstream", "--dir", str(tmp_path)]) == 7
    assert "ROCKETMQ_HOME is not set" in capsys.readouterr().err


class _Statvfs:
    """What ``os.statvfs`` says of a 100-block disk with ``free`` blocks free, ``usable`` of them usable."""

    def __init__(self, free: int, usable: int) -> None:
        self.f_blocks, self.f_bfree, self.f_bavail, self.f_frsize = 100, free, usable, 4096


@pytest.mark.parametrize("free, usable, expected", [(9, 4, 0.96), (20, 20, 0.80), (10, 10, 0.90)])
def test_disk_use_is_computed_as_upstream_computes_it(free: int, usable: int, expected: float,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``UtilAll.getDiskPartitionSpaceUsedPercent``: used = total - free, over used + usable, rounded up."""
    monkeypatch.setattr("os.statvfs", lambda path: _Statvfs(free, usable))
    assert disk_use(Path("/")) == expected


def test_txmq_upstream_refuses_a_disk_upstream_would_refuse_before_starting_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """At 90% the broker starts, then refuses every put (the CI run that found this failed five tests
    late, in their workloads); the command says so first, and starts no process."""
    launched = tmp_path / "launched"
    (tmp_path / "bin").mkdir()
    for name in ("mqnamesrv", "mqbroker", "mqproxy", "mqadmin"):
        (tmp_path / "bin" / name).write_text(f"#!/bin/sh\necho {name} >> {launched}\nexit 1\n")
        (tmp_path / "bin" / name).chmod(0o755)
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    monkeypatch.setattr("os.statvfs", lambda path: _Statvfs(free=10, usable=9))
    assert main(["upstream", "--dir", str(tmp_path / "work")]) == ExitCode.WRITE_REFUSED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "91% full" in err[0] and "90%" in err[0], err
    assert not launched.exists()


def _fake_mqadmin(home: Path, failures: int) -> Path:
    """A distribution whose mqadmin fails ``failures`` times as upstream's does (exit 0, the
    SubCommandException on stderr), then succeeds; each call is logged."""
    (home / "bin").mkdir(parents=True)
    (home / "work").mkdir()  # the cluster's folder, which start() makes
    calls = home / "calls"
    script = home / "bin" / "mqadmin"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {calls}
if [ "$(wc -l < {calls})" -le {failures} ]; then
  echo "org.apache.rocketmq.tools.command.SubCommandException: UpdateTopicSubCommand command failed" >&2
  exit 0
fi
echo "create topic to 127.0.0.1:10911 success."
""")
    script.chmod(0o755)
    return calls


def test_create_topic_sees_a_failed_mqadmin_and_tries_again(tmp_path: Path) -> None:
    calls = _fake_mqadmin(tmp_path / "home", failures=1)
    cluster = UpstreamCluster(tmp_path / "home", tmp_path / "home" / "work", base_port=30000)
    cluster.create_topic("t", "TRANSACTION")
    assert len(calls.read_text().splitlines()) == 2
    never = _fake_mqadmin(tmp_path / "home2", failures=99)
    with pytest.raises(BrokerUnavailableError, match="mqadmin updateTopic failed: .*SubCommandException"):
        UpstreamCluster(tmp_path / "home2", tmp_path / "home2" / "work", base_port=30000).create_topic("t")
    assert len(never.read_text().splitlines()) == TOPIC_ATTEMPTS
