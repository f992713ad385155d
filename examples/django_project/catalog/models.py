from django.db import models


class Book(models.Model):
    title = models.CharField(max_length=200)
    author = models.CharField(max_length=200)
    year = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.title} by {self.author} ({self.year})"
