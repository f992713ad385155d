"""Settings of the bookshop example: one app, SQLite, nothing else.

``BOOKSHOP_DB`` chooses the database file (the tests point it at a temporary one).
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "bookshop-example-only-not-a-secret"
DEBUG = True
ALLOWED_HOSTS: list = []

INSTALLED_APPS = ["catalog"]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("BOOKSHOP_DB", str(BASE_DIR / "db.sqlite3")),
    }
}

USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
