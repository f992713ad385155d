"""``--schema FILE.json`` and ``--output-json``: the command's structured output
(docs/structured-output.md#the-command-line).

With either option the run must end with JSON (in the file's JSON Schema, or any JSON value):
the answer streams to stderr like the rest of the run's progress, and stdout gets only the
validated JSON, on one line. A run that ends without a valid output exits with status 1.
"""

from __future__ import annotations

import argparse
from typing import IO, Any, Optional

from .._files import read_regular
from ..ai.nesting import MAX_SCHEMA_DEPTH, loads
from ..exceptions import InvalidValueError
from ..output import check_output_type
from ..result import RunResult
from .config import SetupError
from .render import json_line

__all__ = ["add_arguments", "output_schema", "print_output", "wants_output"]

ANY_JSON: dict[str, Any] = {}
"""The schema of ``--output-json``: any JSON value."""
MAX_SCHEMA_BYTES = 1024 * 1024
"""The largest ``--schema`` file read."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--schema",
        metavar="FILE.json",
        help="answer with JSON in this JSON Schema: only the validated JSON is printed on stdout",
    )
    group.add_argument("--output-json", action="store_true", help="answer with any JSON value, printed on stdout")


def wants_output(args: argparse.Namespace) -> bool:
    return bool(args.schema or args.output_json)


def output_schema(args: argparse.Namespace) -> Optional[dict[str, Any]]:
    """The JSON Schema the options ask for (None: a text answer); SetupError for a bad file."""
    if args.output_json:
        return dict(ANY_JSON)
    if not args.schema:
        return None
    try:
        schema = loads(read_regular(args.schema, MAX_SCHEMA_BYTES), "the schema", MAX_SCHEMA_DEPTH)
    except OSError as exc:
        raise SetupError(f"--schema {args.schema}: {exc.strerror or exc}") from None
    except InvalidValueError as exc:
        raise SetupError(f"--schema {args.schema}: {exc}") from None
    except ValueError as exc:
        raise SetupError(f"--schema {args.schema}: not JSON ({exc})") from None
    if not isinstance(schema, dict):
        raise SetupError(f"--schema {args.schema}: a JSON Schema is an object, got {type(schema).__name__}")
    try:
        check_output_type("--schema", schema)
    except ValueError as exc:
        raise SetupError(f"--schema {args.schema}: {exc}") from None
    return schema


def print_output(result: RunResult, out: IO[str]) -> None:
    """The validated JSON of ``result`` on one line (nothing if it has none)."""
    if result.structured is not None:
        out.write(json_line(result.structured.data) + "\n")
        out.flush()
