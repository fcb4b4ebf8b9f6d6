"""Byte counts: parsing ``"64MiB"``, validating byte arguments, printing ``64 MiB``.

One parser serves the command line (``--workspace-limit 64MiB``) and the
Python API (``workspace_limit="64MiB"``), so both accept the same strings.
Imports nothing heavy (no TensorFlow): the command line uses it before
deciding whether TensorFlow is needed.
"""

import math
import numbers
import re

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30}
_INT64_MAX = (1 << 63) - 1
_EXAMPLES = "a byte count such as 67108864, '64MiB' or '1GiB' (binary units B, KiB, MiB, GiB)"


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
            raise ValueError(f"expected {_EXAMPLES}, got {text!r}")
        value, unit = float(match.group(1)), match.group(2).lower()
    scaled = value * _UNITS[unit]
    if scaled < 0 or scaled != int(scaled):
        raise ValueError(f"byte count must be a non-negative whole number of bytes, got {text!r}")
    return int(scaled)


def to_bytes(value, name):
    """Validates a byte argument of the Python API and returns it as an int.

    Accepts what :func:`parse_bytes` accepts (``"64MiB"``, ``"1GiB"``,
    ``"67108864"``) and whole numbers: Python and numpy integers, and floats
    with an integral value (``64 * 2**20``, ``6.4e7``).

    Args:
      value: the argument as the caller gave it.
      name: the argument's name, for the error message (``"workspace_limit"``).

    Returns:
      The byte count, an int in [0, 2**63 - 1].

    Raises:
      ValueError: naming ``name``: not a byte count, negative, fractional or
        above 2**63 - 1.
    """
    if isinstance(value, str):
        try:
            count = parse_bytes(value)
        except ValueError:
            raise ValueError(f"{name} must be {_EXAMPLES}, got {value!r}") from None
    else:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if ok and not isinstance(value, numbers.Integral):
            ok = math.isfinite(value) and float(value).is_integer()
        if not ok or value < 0:
            raise ValueError(f"{name} must be a whole number of bytes >= 0 or {_EXAMPLES}, "
                             f"got {value!r}")
        count = int(value)
    if count > _INT64_MAX:
        raise ValueError(f"{name} must be at most 2**63 - 1 bytes, got {value!r}")
    return count


AUTO_WORKSPACE_LIMIT = -2
"""The ops' ``workspace_limit`` attribute for ``"auto"``: each kernel plans
within what its GPU's allocator can hand out when it is planned (less a
margin of 1/16 of the allocator's memory limit, at least 64 MiB; at most
8 GiB, TensorFlow's own default), and each run takes the fastest planned plan
whose workspace is free at that moment."""


def to_workspace_limit(value, name="workspace_limit"):
    """A workspace limit argument as the ops take it: a byte count (as
    :func:`to_bytes`) or ``"auto"`` (:data:`AUTO_WORKSPACE_LIMIT`).

    Raises:
      ValueError: naming ``name``: neither ``"auto"`` nor a byte count.
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        return AUTO_WORKSPACE_LIMIT
    try:
        return to_bytes(value, name)
    except ValueError as e:
        raise ValueError(f"{e} (or 'auto': follow the GPU's free memory)") from None


def format_workspace_limit(n):
    """A workspace limit as :func:`format_bytes` prints it, or ``auto``."""
    return "auto" if n == AUTO_WORKSPACE_LIMIT else format_bytes(n)


def format_bytes(n):
    """Bytes as ``64 MiB``, ``1.5 MiB``, ``3 KiB`` or ``100 B`` (binary units, up to GiB)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"
