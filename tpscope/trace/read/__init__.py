"""Bytes of a trace file -> typed columns per event group (`extract.RawColumns`).

`fields.py` is the one table of the fields read; the msgspec schema (`schema.py`), the C reader's
key table (`tpscope/trace/_event_fields.h`, generated) and the columns are derived from it.
`cut.py` is the one rule for where an event ends, used by every way of reading a file, and
`strategy.py` chooses that way (by the file's size, the cores and whether the C reader is built).
"""
