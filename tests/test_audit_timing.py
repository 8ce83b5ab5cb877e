"""How long ``txmq audit`` takes (``txmq.audit.timing``): the settle time derived from the endpoint's
settings, ``--quick``, the progress bar, and a read-only ``--out`` refused before any work (issue #25)."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq.audit import timing
from txmq.cli import build_parser, main
from txmq.errors import ConfigError

SERVE = "txmq serve --store st --topic audit --port 8081"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["audit", "127.0.0.1:8081", "--out", "o", *argv])


def test_upstream_defaults_give_the_eight_minute_settle() -> None:
    settings = timing.endpoint_settings(_args())
    assert (settings.transaction_timeout_s, settings.check_interval_s, settings.check_max) == (6, 30, 15)
    assert timing.settle_s(settings, None) == 6 + 16 * 30 + 10 and settings.source == "upstream's defaults"


def test_a_launched_serve_gives_its_own_settings() -> None:
    args = _args("--launch", f"{SERVE} --broker check_interval_ms=2000 --broker check_max=4")
    settings = timing.endpoint_settings(args)
    assert (settings.transaction_timeout_s, settings.check_interval_s, settings.check_max) == (6, 2, 4)
    assert timing.settle_s(settings, None) == 6 + 5 * 2 + 10 and settings.source == "the launched txmq serve"
    assert timing.settle_s(settings, 3.0) == 3.0  # --settle wins


def test_the_command_line_wins_over_a_launched_serve() -> None:
    args = _args("--launch", f"{SERVE} --broker check_interval_ms=2000", "--check-interval", "7")
    settings = timing.endpoint_settings(args)
    assert settings.check_interval_s == 7 and "command line" in settings.source


def test_quick_gives_a_launched_serve_fast_checks_unless_it_has_its_own() -> None:
    assert timing.quick_launch(SERVE) == f"{SERVE} --broker check_interval_ms=5000 --broker check_max=5"
    own = f"{SERVE} --broker check_max=3"
    assert timing.quick_launch(own) == f"{own} --broker check_interval_ms=5000"
    assert timing.quick_launch("my-broker --port 8081") == "my-broker --port 8081"  # not ours to change
    quick = timing.endpoint_settings(_args("--launch", timing.quick_launch(SERVE)))
    total = timing.QUICK_DURATION_S + timing.settle_s(quick, None)
    assert total == 20 + 6 + 6 * 5 + 10  # 76 s, plus start, stop and judging: about 2 minutes


def test_the_bar_fills_with_the_expected_total() -> None:
    written: list[str] = []
    bar = timing.ProgressBar(100, written.append, tty=True)
    assert "[" + "." * 24 + "]" in bar.line("x", bar.started)
    assert "[" + "#" * 12 + "." * 12 + "]   50/100 s  settling" in bar.line("settling", bar.started + 50)
    bar.update("workload")
    bar.close()
    assert written[0].startswith("\rtxmq audit: [") and written[-1] == "\n"
    plain: list[str] = []
    quiet = timing.ProgressBar(100, plain.append, tty=False)
    quiet.update("a")
    quiet.update("b")  # within 30 s of the last line: not printed
    assert len(plain) == 1 and plain[0].endswith("a\n")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory that refuses writes: a read-only tmpfs for root (who writes anywhere else), mode 0555
    for anyone else."""
    directory = tmp_path / "ro"
    directory.mkdir()
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(directory)],
                              capture_output=True)
        if done.returncode != 0:
            pytest.fail(f"root cannot mount a read-only tmpfs: {done.stderr.decode().strip()}")
        try:
            yield directory
        finally:
            subprocess.run(["umount", str(directory)], check=True)
        return
    directory.chmod(0o555)
    try:
        yield directory
    finally:
        directory.chmod(0o755)


def test_a_read_only_out_is_refused_before_any_work(read_only_dir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for out in (read_only_dir, read_only_dir / "audit-out"):
        assert main(["audit", "127.0.0.1:1", "--out", str(out), "--seed", "1"]) == ConfigError.exit_code
        err = capsys.readouterr().err
        assert "cannot write in" in err and "Traceback" not in err and "seed" not in err
    assert list(read_only_dir.iterdir()) == []


def test_txmq_diff_settles_by_the_audit_s_formula_from_the_first_heartbeat() -> None:
    from txmq.diff.cli import settle_s as diff_settle_s

    args = argparse.Namespace(settle=None, transaction_timeout=3.0, check_interval=2.0, check_max=15,
                              heartbeat=5)
    assert diff_settle_s(args) == timing.settle_time_s(3.0, 2.0, 15) + 5 == 3 + 16 * 2 + 5 + 10
    assert diff_settle_s(argparse.Namespace(**dict(vars(args), settle=7))) == 7
