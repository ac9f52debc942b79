"""The C extension that reads trace events into columns (the rest is in pyproject.toml).

It is optional: where it cannot be built (no C compiler), the analyzer reads traces with msgspec
alone, with the same results, more slowly (docs/benchmarks.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tpscope.trace._event_columns",
            sources=["tpscope/trace/_event_columns.c", "third_party/yyjson/yyjson.c"],
            include_dirs=["third_party/yyjson"],
            depends=["tpscope/trace/_event_fields.h"],  # generated from trace/read/fields.py
            optional=True,
        )
    ]
)
