"""Google-style docstring parsing (piagent.docstrings)."""

from __future__ import annotations

from piagent.docstrings import parse_docstring


def test_summary_and_args_with_multi_line_descriptions() -> None:
    doc = """Fetch a page.

    Args:
        url: The address
            to fetch.
        timeout (float): Seconds to wait.

            A second paragraph.
    """
    parsed = parse_docstring(doc)
    assert parsed.description == "Fetch a page."
    assert parsed.params == {"url": "The address to fetch.", "timeout": "Seconds to wait.\n\nA second paragraph."}


def test_returns_raises_and_examples_are_ignored() -> None:
    doc = """Divide.

    Args:
        a: Numerator.

    Returns:
        b: not a parameter, a return description.

    Raises:
        ZeroDivisionError: when b is 0.

    Examples:
        x: also not a parameter
    """
    parsed = parse_docstring(doc)
    assert parsed.description == "Divide."
    assert parsed.params == {"a": "Numerator."}


def test_description_keeps_every_paragraph_before_the_first_section() -> None:
    doc = """First line.

    Second paragraph that
    wraps.

    Args:
        x: X.
    """
    assert parse_docstring(doc).description == "First line.\n\nSecond paragraph that\nwraps."


def test_no_docstring_gives_empty_description_and_no_params() -> None:
    for doc in (None, ""):
        parsed = parse_docstring(doc)
        assert parsed.description == ""
        assert parsed.params == {}


def test_docstring_without_sections_is_all_description() -> None:
    assert parse_docstring("Just a summary.").description == "Just a summary."


def test_alternative_section_names_and_starred_names() -> None:
    doc = """Do it.

    Arguments:
        a: A.

    Keyword Args:
        **options: Extra options.
    """
    assert parse_docstring(doc).params == {"a": "A.", "options": "Extra options."}


def test_attributes_section_documents_fields() -> None:
    doc = """A point.

    Attributes:
        x: Horizontal.
    """
    assert parse_docstring(doc).params == {"x": "Horizontal."}


def test_colon_lines_in_the_description_are_not_sections() -> None:
    doc = """Summary.

    Usage: call it.
    Args are below:

    Args:
        a: A.
    """
    parsed = parse_docstring(doc)
    assert parsed.description == "Summary.\n\nUsage: call it.\nArgs are below:"
    assert parsed.params == {"a": "A."}


def test_entry_description_may_start_on_the_next_line() -> None:
    doc = """S.

    Args:
        a:
            The a.
    """
    assert parse_docstring(doc).params == {"a": "The a."}
