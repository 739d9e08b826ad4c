"""Bad input, bad files and secrets fail clearly (issue "never wrong with confidence").

Every case here used to raise an internal error (``TypeError``, pydantic's
``ValidationError``, ``RecursionError``, ``ZeroDivisionError`` ...), pass silently, or
leak a credential; each now raises an ``AgentBranchError`` subclass that says what was
wrong, and bad input is never reported as an engine failure (``ReaderError``).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import httpx
import pytest
from _hostile_inputs import deep
from langchain_core.messages import HumanMessage

import agentbranch as ab
from agentbranch.core.errors import (
    ConfigurationError,
    InvalidFileError,
    InvalidQuestionError,
    InvalidReadError,
    InvalidStateError,
    ReaderError,
)
from agentbranch.engine.readers.remote import RemoteReader

URGENT = {"urgent": ab.yes_no("Urgent?")}


def engine(**kw) -> ab.DecisionEngine:
    return ab.DecisionEngine(ab.ScriptedReader({"urgent": {"yes": 0.7, "no": 0.3}}), **kw)


# -- builders: they check everything decide checks --------------------------------------


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: ab.choice(None, ["a", "b"]), "instructions must be a string"),
        (lambda: ab.choice("q", {1: "a", 2: "b"}), "option name must be a string"),
        (lambda: ab.choice("q", [1, 2]), "option name must be a string"),
        (lambda: ab.choice("q", {"a": 3, "b": None}), "description of option 'a'"),
        (lambda: ab.choice("q", ["a", " "]), "must not be empty"),
        (lambda: ab.choice("q", ["a", "b", "a"]), "repeated: \\['a'\\]"),
        (lambda: ab.choice("q", "ab"), "list of names or a mapping"),
        (lambda: ab.choice("q", [f"o{i}" for i in range(256)]), "at most 255"),
        (lambda: ab.choice("q\ud800", ["a", "b"]), "unpaired surrogate"),
        (lambda: ab.yes_no(3), "instructions must be a string"),
        (lambda: ab.yes_no(""), "must not be empty"),
        (lambda: ab.yes_no("   "), "must not be empty"),
        (lambda: ab.yes_no("q", yes=5), "yes= description must be a string"),
        (lambda: ab.score("q", ["a"]), "at least 2"),
        (lambda: ab.score("q", None), "list of level names"),
        (lambda: ab.score("q", "abc"), "list of level names"),
        (lambda: ab.score("q", [str(i) for i in range(11)]), "at most 10 levels"),
        (lambda: ab.score("q", ["low", "low"]), "repeated"),
        (lambda: ab.score("q", ["low", 2]), "must be strings"),
    ],
)
def test_builders_refuse_bad_input(build, match):
    with pytest.raises(InvalidQuestionError, match=match):
        build()


def test_wire_questions_get_the_same_checks_at_decide():
    with pytest.raises(InvalidQuestionError, match="instructions must not be empty"):
        engine().decide("s", {"q": {"type": "noul", "instructions": ""}})
    with pytest.raises(InvalidQuestionError, match="question 'q'.*repeated"):
        engine().decide("s", {"q": {"type": "score", "instructions": "?", "criteria": ["a", "a"]}})
    with pytest.raises(InvalidQuestionError, match="question id.*surrogate"):
        engine().decide("s", {"q\udc00": ab.yes_no("ok?")})


# -- engine arguments ---------------------------------------------------------------------


@pytest.mark.parametrize("questions", [None, 3, b"ab", "ab", [1], ab.yes_no("?")])
def test_decide_refuses_bad_questions(questions):
    with pytest.raises(InvalidQuestionError):
        engine().decide("s", questions)


@pytest.mark.parametrize(
    "kw",
    [
        {"draws": "2"},
        {"draws": None},
        {"draws": 0},
        {"draws": True},
        {"draws": 1.5},
        {"permutations": 0},
        {"permutations": "3"},
        {"timeout_s": 0},
        {"timeout_s": -1},
        {"timeout_s": math.nan},
        {"timeout_s": math.inf},
        {"timeout_s": "1"},
        {"calibration": 3},
        {"instructions": 5},
        {"instructions": "You triage \ud800 tickets"},
    ],
)
def test_engine_constructor_refuses_bad_arguments(kw):
    with pytest.raises(ConfigurationError):
        engine(**kw)


def test_engine_refuses_a_reader_that_is_not_one():
    with pytest.raises(ConfigurationError, match="must be an agentbranch Reader"):
        ab.DecisionEngine(object())


@pytest.mark.parametrize("draws", [-1, 0, "2", 1.0, True])
def test_decide_refuses_bad_draws(draws):
    with pytest.raises(ConfigurationError, match="draws must be an integer"):
        engine().decide("s", URGENT, draws=draws)


def test_decide_many_refuses_a_single_state():
    with pytest.raises(ConfigurationError, match="list of states"):
        engine().decide_many("one state", URGENT)


# -- states -------------------------------------------------------------------------------


def _circular() -> dict:
    state: dict = {"a": 1}
    state["self"] = [state]
    return state


@pytest.mark.parametrize(
    "state, match",
    [
        (_circular(), "contains itself"),
        (deep(5000), "nested more than"),
        ("ticket \ud800 text", "unpaired surrogate"),
        ({"text": "fine", "k\udfff": 1}, "unpaired surrogate"),
        ([HumanMessage("hello \udc80")], "unpaired surrogate"),
        ({1, 2}, "JSON-compatible"),
    ],
)
def test_bad_states_are_input_errors_not_engine_failures(state, match):
    with pytest.raises(InvalidStateError, match=match) as err:
        engine().decide(state, URGENT)
    assert not isinstance(err.value, ReaderError)  # FailOpen would not swallow it


def test_a_shared_but_acyclic_state_is_fine():
    shared = {"x": 1}
    assert engine().decide({"a": shared, "b": [shared, shared]}, URGENT)["urgent"].label == "yes"


# -- calibration files --------------------------------------------------------------------


def _write(tmp_path: Path, content: bytes | str, name: str = "cal.json") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "is empty"),
        (b'{"version": 1, "temperatures": {"a": 2', "line 1 column"),
        (b'{"version": 1,\n"temperatures": {\n', "line 3 column 1"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"temperatures": {"a": 2}}', "no format version"),
        (b'{"version": 2}', "format version 2"),
        (b'{"version": 1, "temps": {}}', "temps: unknown field"),
        (b'{"version": 1, "temperatures": {"a": 0}}', "temperatures.a: .*finite number > 0"),
        (b'{"version": 1, "temperatures": {"a": NaN}}', "temperatures.a"),
        (b'{"version": 1, "temperatures": {"a": 1e-320}}', "temperatures.a"),
        (b'{"version": 1, "temperatures": {"a": -1}}', "temperatures.a"),
        (b'{"version": 1, "default": "hot"}', "default"),
        (b'{"version": 1, "by_type": {"yesno": 2}}', "by_type"),
        (b'{"version": 1, "thresholds": {"a": 1.5}}', "thresholds.a"),
    ],
)
def test_bad_calibration_files_name_the_file(tmp_path, content, match):
    path = _write(tmp_path, content)
    with pytest.raises(InvalidFileError, match=match) as err:
        ab.Calibration.load(path)
    assert str(path) in str(err.value)
    with pytest.raises(InvalidFileError):
        engine(calibration=path)


def test_missing_calibration_file_and_directory(tmp_path):
    with pytest.raises(InvalidFileError, match="does not exist; write one with"):
        ab.Calibration.load(tmp_path / "nope.json")
    with pytest.raises(InvalidFileError, match="is a directory"):
        engine(calibration=tmp_path)


def test_calibration_path_object_loads_and_round_trips(tmp_path):
    path = ab.Calibration(temperatures={"urgent": 2.0}).save(tmp_path / "cal.json")
    assert json.loads(path.read_text())["version"] == 1
    d = engine(calibration=path).decide("s", URGENT)["urgent"]  # a Path, not a str
    assert d.calibrated
    assert d.probabilities["yes"] == pytest.approx(0.7**0.5 / (0.7**0.5 + 0.3**0.5))


@pytest.mark.parametrize("t", [0, -1.0, math.nan, math.inf, 1e-320])
def test_calibration_in_code_refuses_bad_temperatures(t):
    with pytest.raises(ConfigurationError, match="temperature"):
        ab.Calibration(temperatures={"urgent": t})
    cal = ab.Calibration()
    with pytest.raises(ConfigurationError, match="temperature"):
        cal.default = t


def test_tiny_and_huge_temperatures_still_give_distributions():
    sharp = engine(calibration=ab.Calibration(default=1e-300)).decide("s", URGENT)["urgent"]
    assert sharp.probabilities == {"yes": 1.0, "no": 0.0}
    flat = engine(calibration=ab.Calibration(default=1e300)).decide("s", URGENT)["urgent"]
    assert flat.probabilities["yes"] == pytest.approx(0.5)


def test_calibration_for_questions_never_asked_is_reported(tmp_path, caplog):
    path = ab.Calibration(temperatures={"team": 2.0}, thresholds={"team": 0.6}).save(
        tmp_path / "cal.json"
    )
    with caplog.at_level(logging.WARNING, logger="agentbranch.calibration"):
        cal = ab.Calibration.load(path, question_ids=["route", "urgent"])
    assert cal.temperatures == {"team": 2.0}
    assert "never asked: ['team']" in caplog.text
    with pytest.raises(InvalidFileError, match="never asked: \\['team'\\]"):
        ab.Calibration.load(path, question_ids=["route"], strict=True)
    with pytest.raises(ConfigurationError, match="never asked"):
        cal.check(["route"], strict=True)
    assert cal.check(["team"]) == []


def test_engine_warns_once_about_a_question_its_calibration_lacks(caplog):
    eng = engine(calibration=ab.Calibration(temperatures={"urgnet": 2.0}))
    with caplog.at_level(logging.WARNING, logger="agentbranch.calibration"):
        eng.decide("a", URGENT)
        eng.decide("b", URGENT)
    warnings = [r for r in caplog.records if r.name == "agentbranch.calibration"]
    assert len(warnings) == 1
    assert "'urgent' has no temperature" in warnings[0].getMessage()
    assert "['urgnet']" in warnings[0].getMessage()


# -- remote answers and secrets -----------------------------------------------------------

URL = "http://vllm.test:8000"


def _server(answer: dict, diagnostics: dict | None = None):
    def handle(request: httpx.Request) -> httpx.Response:
        body = {"model": "m", "answers": {"urgent": answer}}
        if diagnostics is not None:
            body["diagnostics"] = {"urgent": diagnostics}
        # json.dumps writes NaN/Infinity literals, as a broken server would
        return httpx.Response(200, content=json.dumps(body).encode())

    return handle


@pytest.mark.parametrize(
    "answer, diagnostics, match",
    [
        ({"noul": math.nan}, None, "noul nan"),
        ({"noul": 1.7}, None, "noul 1.7"),
        ({"noul": -0.2}, None, "noul -0.2"),
        ({"noul": True}, None, "noul True"),
        ({"probabilities": {"yes": math.nan, "no": 0.1}}, None, "probability nan"),
        ({"probabilities": {"yes": math.inf, "no": 0.1}}, None, "probability inf"),
        ({"probabilities": {"yes": -0.9, "no": 0.1}}, None, "probability -0.9"),
        ({"probabilities": {"yes": "0.9", "no": 0.1}}, None, "probability '0.9'"),
        ({"probabilities": {"yes": 0.9, "no": 0.9}}, None, "sum to 1.8"),
        ({"probabilities": {"yes": 0.5, "no": 0.5, "maybe": 0}}, None, "does not have"),
        ({"noul": 0.9}, {"label_mass": math.nan}, "label_mass nan"),
        ({"noul": 0.9, "confidence": 2.0}, None, "confidence 2.0"),
    ],
)
def test_invalid_server_answers_are_invalid_reads(answer, diagnostics, match):
    reader = RemoteReader(URL, transport=httpx.MockTransport(_server(answer, diagnostics)))
    with pytest.raises(InvalidReadError, match=match):
        ab.DecisionEngine(reader).decide("s", URGENT)


def test_invalid_server_answers_under_fail_open():
    from agentbranch.policy import FailOpen, Policy, Resolver

    reader = RemoteReader(URL, transport=httpx.MockTransport(_server({"noul": math.nan})))
    rec = Resolver(ab.DecisionEngine(reader), URGENT, Policy(on_error=FailOpen("no"))).resolve("s")[
        "urgent"
    ]
    assert (rec["decided_by"], rec["label"], rec["confidence"]) == ("fail_open", "no", None)


KEY = "sk-live-abcdef0123456789"


def _echo_server(status: int):
    """A server (or proxy) that echoes the request's credentials back in its error."""

    def handle(request: httpx.Request) -> httpx.Response:
        auth = request.headers.get("authorization", "")
        return httpx.Response(
            status,
            json={"error": {"message": f"bad credentials: Authorization: {auth} ({KEY})"}},
        )

    return handle


@pytest.mark.parametrize("status", [401, 403, 422, 500, 503])
@pytest.mark.parametrize("how", ["api_key", "userinfo", "header"])
def test_no_credential_in_any_error_or_record(status, how):
    from agentbranch.policy import FailClosed, Policy, Resolver

    kw: dict = {"transport": httpx.MockTransport(_echo_server(status)), "max_retries": 1}
    kw["backoff_s"] = 0.0
    if how == "api_key":
        reader = RemoteReader(URL, api_key=KEY, **kw)
    elif how == "userinfo":
        reader = RemoteReader(f"http://agent:{KEY}@vllm.test:8000", **kw)
    else:
        reader = RemoteReader(URL, headers={"X-Api-Key": KEY}, **kw)
    assert KEY not in repr(reader) and KEY not in reader.url
    eng = ab.DecisionEngine(reader)
    with pytest.raises(ReaderError) as err:
        eng.decide("s", URGENT)
    text = str(err.value) + repr(err.value) + str(getattr(err.value, "server_message", ""))
    assert KEY not in text and "***" in text
    rec = Resolver(eng, URGENT, Policy(on_error=FailClosed("safe"))).resolve("s")["urgent"]
    assert KEY not in json.dumps(rec)


def test_userinfo_is_sent_as_basic_auth():
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"answers": {"urgent": {"noul": 0.8}}})

    reader = RemoteReader(
        f"http://agent:{KEY}@vllm.test:8000", transport=httpx.MockTransport(handle)
    )
    assert ab.DecisionEngine(reader).decide("s", URGENT)["urgent"].label == "yes"
    assert seen[0].headers["authorization"] == httpx.BasicAuth("agent", KEY)._auth_header
    assert seen[0].url == "http://vllm.test:8000/v1/systemone"


def test_bad_base_url_does_not_echo_credentials():
    with pytest.raises(ConfigurationError) as err:
        RemoteReader(f"agent:{KEY}@vllm.test:8000")
    assert KEY not in str(err.value)
    with pytest.raises(ConfigurationError, match="give the credentials once"):
        RemoteReader(f"http://agent:{KEY}@vllm.test", api_key="other-key")


def _per_state_server(request: httpx.Request) -> httpx.Response:
    """NaN for states that contain 'bad', a valid answer otherwise."""
    body = json.loads(request.content)
    p = math.nan if "bad" in body["state"] else 0.8
    return httpx.Response(200, content=json.dumps({"answers": {"urgent": {"noul": p}}}).encode())


def test_an_invalid_server_answer_fails_only_its_caller_in_a_shared_batch():
    import threading

    from agentbranch.engine.batching import BatchingReader

    remote = RemoteReader(URL, transport=httpx.MockTransport(_per_state_server))
    # max_batch=2: the window closes as soon as both callers joined (no timing).
    eng = ab.DecisionEngine(BatchingReader(remote, max_wait_s=10.0, max_batch=2))
    outcomes: dict[str, object] = {}

    def run(state: str) -> None:
        try:
            outcomes[state] = eng.decide(state, URGENT)["urgent"].label
        except ab.AgentBranchError as e:
            outcomes[state] = e

    threads = [threading.Thread(target=run, args=(s,)) for s in ("bad one", "good one")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert isinstance(outcomes["bad one"], InvalidReadError)
    assert outcomes["good one"] == "yes"


async def test_an_invalid_server_answer_fails_only_its_caller_async():
    import asyncio

    from agentbranch.engine.batching import BatchingReader

    # The coalescer reads on its worker threads (reader.read, the sync client), so the
    # transport is given for both paths.
    server = httpx.MockTransport(_per_state_server)
    remote = RemoteReader(URL, transport=server, async_transport=server)
    eng = ab.DecisionEngine(BatchingReader(remote, max_wait_s=10.0, max_batch=2))
    bad, good = await asyncio.gather(
        eng.adecide("bad one", URGENT), eng.adecide("good one", URGENT), return_exceptions=True
    )
    assert isinstance(bad, InvalidReadError)
    assert good["urgent"].label == "yes"
    assert eng.reads_via.batch_sizes[-1] == 2  # they did share one read
    # RemoteReader's own async batch answers the bad request with its error in place.
    requests = [eng._prepare(s, URGENT, 1).request for s in ("bad one", "good one")]
    bad_reads, good_reads = await remote.aread(requests)
    assert isinstance(bad_reads, InvalidReadError) and len(good_reads) == 1
    await remote.aclose()


def test_tiny_server_probabilities_times_a_tiny_mass_do_not_underflow():
    """Found by the hypothesis suite: p = 2e-313 with a label mass of 2e-313 underflowed
    to log(0) (a math domain error) instead of giving a finite log-probability."""
    import math

    from agentbranch.engine.readers.remote.parse import label_read

    read = label_read("q", [1.0, 2.2250738585e-313], label_mass=2.2250738585e-313)
    assert all(math.isfinite(lp) and lp <= 0 for lp in read.logprobs)
    assert read.logprobs[0] == math.log(2.2250738585e-313)
