"""``txmq audit``'s command without an endpoint: each mistake (a bad endpoint, option or launch command,
an output that is a file, an unreachable endpoint, a missing C++ client) is one line with the exit code of
its kind, and a launched endpoint that exits is reported."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from txmq.audit import cpp_client, history
from txmq.audit.nemesis import Launched, wait_reachable
from txmq.cli import main
from txmq.errors import BrokerUnavailableError

# The official client reconfigures logging when imported (see ``auditkit``): import it while collecting,
# rather than in the middle of a test through ``txmq audit``.
pytest.importorskip("txmq.audit.driver", reason="the official client is missing: pip install -e '.[serve]'")


@pytest.mark.parametrize(("args", "code", "says"), [
    (["nohost"], 3, "HOST:PORT"),
    (["127.0.0.1:1", "--rate", "0"], 3, "--rate must be positive"),
    (["127.0.0.1:1", "--consumers", "0"], 3, "at least 1"),
    (["127.0.0.1:1", "--fault-kinds", "gremlins"], 3, "--fault-kinds gremlins"),
    (["127.0.0.1:1", "--benchmark-mix", "0.01,0.05"], 3, "three shares SR,SU,CU"),
    (["127.0.0.1:1", "--benchmark-mix", "0,0.5,1"], 3, "below 1"),
    (["127.0.0.1:1"], 8, "unreachable"),
    (["127.0.0.1:1", "--launch", "/no/such/endpoint-binary"], 3, "cannot run"),
])
def test_mistakes_are_one_line_errors(args: list[str], code: int, says: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *args, "--out", str(tmp_path / "out"), "--seed", "1"]) == code
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("txmq audit:")]
    assert len(err) == 1 and says in err[0]


def test_an_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("")
    assert main(["audit", "127.0.0.1:1", "--out", str(tmp_path / "f")]) == 3
    assert "not a directory" in capsys.readouterr().err


def test_a_launched_endpoint_that_exits_is_reported(tmp_path: Path) -> None:
    launched = Launched("sh -c 'exit 4'", "127.0.0.1:1", history.History(), tmp_path / "endpoint.log",
                        start_timeout_s=10)
    with pytest.raises(BrokerUnavailableError, match="exited with 4"):
        launched.start()
    with pytest.raises(BrokerUnavailableError, match="unreachable"):
        wait_reachable("127.0.0.1:1", 0.2)


def test_a_missing_cpp_client_is_one_line_saying_how_to_install_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXMQ_CPP_CLIENT", str(tmp_path / "nothing here"))
    monkeypatch.delitem(sys.modules, f"{cpp_client.ALIAS}.client", raising=False)
    assert main(["audit", "127.0.0.1:1", "--protocol", "remoting", "--out", str(tmp_path / "out")]) == 7
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("txmq audit:")]
    assert len(err) == 1 and f"--target {tmp_path / 'nothing here'} {cpp_client.PIN}" in err[0]
