"""Runnable demo graphs (the ``agentbranch demo`` CLI uses ``triage``)."""

from agentbranch.demo.triage import SAMPLE_TICKETS, build_triage_graph, triage_row

__all__ = ["SAMPLE_TICKETS", "build_triage_graph", "triage_row"]
