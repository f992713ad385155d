"""A few books, so that ``ask_agent`` has a catalogue to answer from right after ``migrate``."""

from typing import Any

from django.db import migrations

BOOKS = [
    ("A Wizard of Earthsea", "Ursula K. Le Guin", 1968),
    ("The Left Hand of Darkness", "Ursula K. Le Guin", 1969),
    ("Pride and Prejudice", "Jane Austen", 1813),
    ("Nineteen Eighty-Four", "George Orwell", 1949),
    ("Dune", "Frank Herbert", 1965),
    ("Small Gods", "Terry Pratchett", 1992),
]


def add_books(apps: Any, schema_editor: Any) -> None:
    Book = apps.get_model("catalog", "Book")
    Book.objects.bulk_create(Book(title=title, author=author, year=year) for title, author, year in BOOKS)


def remove_books(apps: Any, schema_editor: Any) -> None:
    Book = apps.get_model("catalog", "Book")
    for title, author, year in BOOKS:
        Book.objects.filter(title=title, author=author, year=year).delete()


class Migration(migrations.Migration):
    dependencies = [("catalog", "0002_conversation_conversationentry")]

    operations = [migrations.RunPython(add_books, remove_books)]
