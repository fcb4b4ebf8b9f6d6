"""Plain-text tables: the one renderer behind ``plans()``, ``DivisionReport``,
``tf-ucudnn cache show`` and the benchmarks' tables.

A table is a header row, a rule of dashes and the rows, columns separated by
two spaces. A cell is a string, or a list of pieces that may be put on
separate lines: given a ``max_width``, the widest such columns are narrowed
(never below their longest piece) until the table fits, and their cells wrap
between pieces.

    >>> print(render(("pass", "ms"), [("forward", "1.500")], align="lr"))
    pass        ms
    -------  -----
    forward  1.500
"""

_GAP = "  "


def _pieces(cell):
    if isinstance(cell, (list, tuple)):
        return [str(p) for p in cell] or [""]
    return [str(cell)]


def _wrap(pieces, width):
    """Greedy: pieces joined by single spaces, a new line where the next would overflow."""
    lines = [pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return lines


def _fit(natural, minimum, max_width):
    """Narrows the widest shrinkable column, one character at a time, until the
    columns (with their gaps) fit ``max_width`` or none can shrink further."""
    widths = list(natural)
    excess = sum(widths) + len(_GAP) * (len(widths) - 1) - max_width
    while excess > 0:
        shrinkable = [i for i, w in enumerate(widths) if w > minimum[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def render(header, rows, *, align=None, max_width=None):
    """Renders a table as text (no trailing newline, no trailing spaces).

    Args:
      header: the column titles, a sequence of strings.
      rows: sequences of cells, as many as ``header``; a cell is a string (or
        anything ``str()`` takes), or a list of pieces that may wrap onto
        several lines (pieces are joined with single spaces).
      align: one character per column, ``"l"`` (left, the default) or ``"r"``
        (right), e.g. ``"llrr"``.
      max_width: the number of characters a line should not exceed; None does
        not wrap. Only list cells wrap, so a table whose other cells are wider
        stays wider.

    Returns:
      The table as a string of lines.

    Raises:
      ValueError: a row with another number of cells than ``header``, or an
        ``align`` that is not one ``l`` or ``r`` per column.
    """
    header = [str(h) for h in header]
    columns = len(header)
    align = align or "l" * columns
    if len(align) != columns or set(align) - {"l", "r"}:
        raise ValueError(f"align must be one 'l' or 'r' per column ({columns}), got {align!r}")
    cells = []
    for row in rows:
        row = list(row)
        if len(row) != columns:
            raise ValueError(f"every row needs {columns} cells like the header {header}, "
                             f"got {len(row)}: {row!r}")
        cells.append([_pieces(c) for c in row])
    natural = [max([len(header[i])] + [len(" ".join(r[i])) for r in cells]) for i in range(columns)]
    minimum = [max([len(header[i])] + [max(len(p) for p in r[i]) for r in cells])
               for i in range(columns)]
    widths = natural if max_width is None else _fit(natural, minimum, max_width)

    def line(texts):
        padded = [t.rjust(w) if a == "r" else t.ljust(w) for t, w, a in zip(texts, widths, align)]
        return _GAP.join(padded).rstrip()

    out = [line(header), _GAP.join("-" * w for w in widths)]
    for row in cells:
        wrapped = [_wrap(pieces, w) for pieces, w in zip(row, widths)]
        for k in range(max(len(w) for w in wrapped)):
            out.append(line([w[k] if k < len(w) else "" for w in wrapped]))
    return "\n".join(out)
