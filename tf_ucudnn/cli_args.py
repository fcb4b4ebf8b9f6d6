"""argparse types shared by the command-line entry points (demo, bench).

Byte counts are parsed by :func:`tf_ucudnn.units.parse_bytes`, the parser the
Python API uses too.
"""

import argparse

from tf_ucudnn.units import parse_bytes


def byte_count(text):
    """An argparse type: a byte count such as ``64MiB`` (see :func:`parse_bytes`)."""
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
