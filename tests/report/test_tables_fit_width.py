"""`report.tables.fit_width`: a table wider than 80 columns becomes tables of its columns, each led by the
first (`#`), every cell kept; dollars (`$63.4M`) read as numbers."""

from rich.table import Table

from fabriclab.report.tables import fit_width, is_number, plain_text, table_data


def _table(columns: int) -> Table:
    table = Table(title="wide")
    for c in ["#", *(f"column {k}" for k in range(1, columns))]:
        table.add_column(c, justify="right")
    for i in range(1, 4):
        table.add_row(str(i), *(f"{i * k:,}.5 s" for k in range(1, columns)))
    return table


def test_a_wide_table_is_split_into_tables_led_by_the_first_column():
    wide = _table(12)
    assert max(len(line) for line in plain_text(*table_data(wide)).splitlines()) > 80
    parts = fit_width(wide, 80)
    assert len(parts) >= 2
    seen = []
    for part in parts:
        title, columns, rows = table_data(part)
        assert columns[0] == "#" and [r[0] for r in rows] == ["1", "2", "3"]
        assert title.startswith("wide (columns ")
        assert all(len(line) <= 80 for line in plain_text(title, columns, rows).splitlines()[1:])
        seen += columns[1:]
    assert seen == table_data(wide)[1][1:]  # every column once, in order


def test_a_table_that_fits_is_itself_and_dollars_are_numbers():
    narrow = _table(3)
    assert fit_width(narrow, 80) == [narrow]
    assert all(is_number(t) for t in ("$63.4M", "$1,234.5M", "$850.0k", "$950"))
    assert not is_number("$") and not is_number("$ per GPU")
