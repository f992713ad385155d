"""The agent's tool: it reads the catalogue through the Django ORM."""

from django.db.models import Q

from piagent import tool

from .models import Book


@tool(on_run_thread=True)  # the caller's thread and connection: it sees the caller's transaction
def search_books(query: str) -> str:
    """Find the books whose title or author contains the query.

    Args:
        query: Part of a title or of an author's name, e.g. "Tolkien".
    """
    books = Book.objects.filter(Q(title__icontains=query) | Q(author__icontains=query)).order_by("year", "title")
    if not books:
        return f"No book matches {query!r}."
    return "\n".join(str(book) for book in books)
