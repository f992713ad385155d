from django.db import models


class Book(models.Model):
    title = models.CharField(max_length=200)
    author = models.CharField(max_length=200)
    year = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.title} by {self.author} ({self.year})"


class Conversation(models.Model):
    """One agent session (piagent.sessions): its id and its header record."""

    id = models.CharField(primary_key=True, max_length=64)
    header = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)


class ConversationEntry(models.Model):
    """One entry of a conversation, as pi's JSON, at its position in the append order."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="entries")
    position = models.PositiveIntegerField()
    entry_id = models.CharField(max_length=64)
    entry = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["conversation", "position"], name="one_entry_per_position")]
