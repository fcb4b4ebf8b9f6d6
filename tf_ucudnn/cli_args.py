"""Argument types shared by the command-line entry points (demo, bench)."""

import argparse
import re

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30}


def parse_bytes(text):
    """Parses a byte count such as ``"67108864"``, ``"64MiB"``, ``"64 MiB"`` or ``"1GiB"``.

    Units are binary: B, K/KiB, M/MiB, G/GiB (case-insensitive). Decimal
    units (MB, GB) are rejected rather than guessed.

    Args:
      text: the string to parse (an int is returned as is).

    Returns:
      The number of bytes, an int >= 0.

    Raises:
      ValueError: not a non-negative number with a known unit, or not a
        whole number of bytes.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = text, ""
    else:
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not match or match.group(2).lower() not in _UNITS:
            raise ValueError(f"expected a byte count such as 67108864, 64MiB or 1GiB "
                             f"(binary units B, KiB, MiB, GiB), got {text!r}")
        value, unit = float(match.group(1)), match.group(2).lower()
    scaled = value * _UNITS[unit]
    if scaled < 0 or scaled != int(scaled):
        raise ValueError(f"byte count must be a non-negative whole number of bytes, got {text!r}")
    return int(scaled)


def byte_count(text):
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text!r}")
    return value


def at_least(minimum):
    def parse(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text!r}")
        return value
    return parse
