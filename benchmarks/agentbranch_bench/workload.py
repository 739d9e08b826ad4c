"""The states and questions every comparison reads: support tickets, one longer
thread, three questions of the three kinds."""

from __future__ import annotations

from typing import Any

__all__ = ["THREAD", "TICKETS", "questions", "states"]

TICKETS = [
    "The dashboard returns 500 errors for everyone since 9am.",
    "I was charged twice for my subscription this month.",
    "The CSV export puts dates in the wrong column.",
    "Can you add dark mode to the mobile app?",
    "My password reset link expired before I could use it.",
    "Our invoices show the wrong VAT number since the update.",
    "The app crashes when I upload a photo larger than 10 MB.",
    "Please cancel my account and refund the last payment.",
]


#: An agent's state as it usually is: a short conversation, not one line.
THREAD = """Customer: Hi, I was charged twice for my subscription this month, once on the 3rd
and again on the 5th. Both charges are 49 EUR and show the same invoice number.
Agent: Sorry about that! Could you send the last four digits of the card?
Customer: It ends in 4242. I also noticed my plan still says Pro although I moved to
Team last week, so maybe the upgrade created a second subscription?
Agent: That is possible. I am checking with our billing system now.
Customer: Thanks. I need the duplicate refunded before the end of the week because our
finance team closes the books on Friday, and this is the second time it has happened."""


def questions() -> dict[str, Any]:
    """The three questions every comparison asks: a choice, a yes/no and a score."""
    import agentbranch as ab

    return {
        "team": ab.choice(
            "Which team should handle this ticket?",
            {"billing": "Invoices and refunds", "outage": "Service down", "bug": "Broken"},
        ),
        "urgent": ab.yes_no("Does this need a reply within the hour?"),
        "frustration": ab.score("How frustrated is the customer?", ["calm", "annoyed", "angry"]),
    }


def states(n: int, tag: str = "") -> list[str]:
    """``n`` distinct ticket states."""
    return [f"{TICKETS[i % len(TICKETS)]} (ticket {tag}{i})" for i in range(n)]
