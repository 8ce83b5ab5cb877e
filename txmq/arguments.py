"""Argument types shared by the commands, so that each mistake reads the same wherever it is made."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number above zero; argparse turns the error into its one-line usage message."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value
