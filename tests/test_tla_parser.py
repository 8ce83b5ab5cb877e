"""The TLC output parser, on outputs recorded from real ``tlc2.TLC -tool`` runs (tests/data/tlc/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.tla.parser import TlcFinding, TlcResult, parse_tlc_output

DATA = Path(__file__).parent / "data" / "tlc"
SPEC_VARIABLES = {
    "local",
    "said",
    "aged",
    "ownEndDone",
    "alive",
    "log",
    "cursorDurable",
    "opBuf",
    "cache",
    "cursor",
    "index",
    "net",
    "oks",
    "checks",
    "crashes",
    "pcrashes",
    "losses",
    "dups",
}


def parse(name: str, exit_code: int | None = None) -> TlcResult:
    return parse_tlc_output((DATA / name).read_text(encoding="utf-8"), exit_code)


def assert_well_formed_trace(result: TlcResult) -> None:
    assert [state.number for state in result.trace] == list(range(1, len(result.trace) + 1))
    assert result.trace[0].action == "Initial predicate"
    for state in result.trace:
        if state.action != "Stuttering":
            assert set(state.variables) == SPEC_VARIABLES, state.number


def test_pass_gives_counts_depth_and_duration() -> None:
    result = parse("pass.out", 0)
    assert result.finding is TlcFinding.PASS
    assert (result.distinct_states, result.total_states, result.depth) == (32236, 143603, 17)
    assert result.duration_s == pytest.approx(22.963)
    assert result.violated is None and result.trace == [] and result.messages == []
    assert result.exit_code == 0


def test_invariant_violation_names_the_invariant_and_keeps_the_trace() -> None:
    result = parse("invariant.out", 12)
    assert result.finding is TlcFinding.INVARIANT
    assert result.violated == "DiscardOnlyAtMax"
    assert result.messages == ["Invariant DiscardOnlyAtMax is violated."]
    assert len(result.trace) == 8
    assert_well_formed_trace(result)
    assert result.trace[1].action == "SendHalf(t1)"
    assert result.trace[1].variables["log"] == '<<[t |-> t1, k |-> "half", n |-> 0]>>'
    last = result.trace[-1].variables
    assert '"discard"' in last["log"] and '"real"' in last["log"]


def test_multi_line_values_are_joined() -> None:
    result = parse("invariant.out")
    nets = [state.variables["net"] for state in result.trace if "\n" in state.variables["net"]]
    assert nets, "the recorded trace has a message in flight printed over several lines"
    assert all(net.startswith("{ [") and net.endswith("] }") for net in nets)


def test_deadlock() -> None:
    result = parse("deadlock.out", 11)
    assert result.finding is TlcFinding.DEADLOCK
    assert result.violated is None
    assert result.messages == ["Deadlock reached."]
    assert_well_formed_trace(result)


def test_liveness_violation_ending_in_stuttering() -> None:
    result = parse("liveness_stuttering.out", 13)
    assert result.finding is TlcFinding.LIVENESS
    assert result.violated == "EventuallyResolved"
    assert_well_formed_trace(result)
    assert result.trace[-1].action == "Stuttering" and result.trace[-1].variables == {}
    assert result.loops_back_to is None


def test_liveness_violation_with_a_loop() -> None:
    result = parse("liveness_lasso.out", 13)
    assert result.finding is TlcFinding.LIVENESS
    assert result.violated == "Reaches2"
    assert [(s.action, s.variables) for s in result.trace] == [
        ("Initial predicate", {"x": "0"}),
        ("Next", {"x": "1"}),
    ]
    assert result.loops_back_to == 1


def test_parse_error_keeps_sanys_report() -> None:
    result = parse("parse_error.out", 150)
    assert result.finding is TlcFinding.PARSE_ERROR
    report = result.messages[0]
    assert "***Parse Error***" in report and "line 88, column 20" in report
    assert "Parsing file" not in report
    assert result.distinct_states is None


def test_semantic_error_keeps_sanys_report() -> None:
    result = parse("semantic_error.out", 150)
    assert result.finding is TlcFinding.PARSE_ERROR
    assert "Unknown operator: `Moode'." in result.messages[0]


def test_other_tlc_errors_are_errors_with_their_message() -> None:
    output = "\n".join(
        [
            "@!@!@STARTMSG 2185:0 @!@!@",
            "Starting...",
            "@!@!@ENDMSG 2185 @!@!@",
            "@!@!@STARTMSG 1000:1 @!@!@",
            "TLC threw an unexpected exception.",
            "@!@!@ENDMSG 1000 @!@!@",
        ]
    )
    result = parse_tlc_output(output, 255)
    assert result.finding is TlcFinding.ERROR
    assert result.messages == ["TLC threw an unexpected exception."]


def test_output_without_verdict_is_an_error_showing_its_tail() -> None:
    result = parse_tlc_output("Error: Could not find or load main class tlc2.TLC\n", 1)
    assert result.finding is TlcFinding.ERROR
    assert result.messages == ["Error: Could not find or load main class tlc2.TLC"]
    assert parse_tlc_output("").messages == ["TLC ended without a verdict"]


def test_output_cut_inside_a_message_keeps_what_arrived() -> None:
    output = "@!@!@STARTMSG 2110:1 @!@!@\nInvariant TypeOK is violated.\n"
    result = parse_tlc_output(output)
    assert (result.finding, result.violated) == (TlcFinding.INVARIANT, "TypeOK")


def test_stray_end_marker_and_unrecognised_state_text_are_ignored() -> None:
    output = "\n".join(
        [
            "@!@!@ENDMSG 2217 @!@!@",
            "@!@!@STARTMSG 2217:4 @!@!@",
            "not a state heading",
            "@!@!@ENDMSG 2217 @!@!@",
            "@!@!@STARTMSG 2217:4 @!@!@",
            "@!@!@ENDMSG 2217 @!@!@",
            "@!@!@STARTMSG 2193:0 @!@!@",
            "Model checking completed. No error has been found.",
            "@!@!@ENDMSG 2193 @!@!@",
        ]
    )
    result = parse_tlc_output(output)
    assert result.finding is TlcFinding.PASS
    assert result.trace == []
