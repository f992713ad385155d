#!/usr/bin/env python
r"""The bookshop example: a Django project whose management command asks an agent.

    cd examples/django_project
    python manage.py migrate
    python manage.py shell -c "from catalog.models import Book; \
        Book.objects.create(title='The Hobbit', author='J. R. R. Tolkien', year=1937)"
    python manage.py ask_agent "Do we have anything by Tolkien?"

The model is $PIAGENT_MODEL, else the embedded local:smollm2-135m (needs piagent[local]).
"""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookshop.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
