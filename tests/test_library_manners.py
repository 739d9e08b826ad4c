"""Library manners: silent unless logging is configured, stdlib logging with key/value
events, no changes to os.environ, torch threads only around the reader's own forward,
model load outside latency_s."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentbranch as ab

SRC = Path(__file__).resolve().parents[1] / "src"

# A fresh process on the default engine (from_env → the embedded MiniLM reader): a plain
# decision, then a decision tool under a policy (the resolved-record path).
DECIDE = """
import agentbranch as ab
from agentbranch.langchain import decision_tool

engine = ab.DecisionEngine.from_env()
questions = {
    "urgent": ab.yes_no("Is this urgent?", yes="Production is down", no="It can wait"),
    "team": ab.choice("Which team?", {"billing": "Invoices and refunds", "outage": "Site is down"}),
}
decisions = engine.decide("The site is down and we are losing orders!", questions)
assert engine.reader.name == "embedded", engine.reader.name
tool = decision_tool(engine, questions, policy=ab.Policy())
tool.invoke({"type": "tool_call", "id": "1", "name": "decide", "args": {"text": "refund me"}})


class Broken(ab.ScriptedReader):
    def read(self, requests):
        raise RuntimeError("the model server is down")


# A failing read under fail-open: a WARNING event, still silent without logging config.
failing = decision_tool(
    ab.DecisionEngine(Broken()),
    {"urgent": questions["urgent"]},
    policy=ab.Policy(on_error=ab.FailOpen("no")),
)
failing.invoke({"type": "tool_call", "id": "2", "name": "decide", "args": {"text": "hi"}})
"""


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTBRANCH_") and k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env["PYTHONPATH"] = str(SRC)
    env["OMP_NUM_THREADS"] = "1"
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(path), str(tmp_path / "out.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


def test_a_fresh_process_deciding_writes_nothing(tmp_path):
    done = _run(DECIDE, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    assert done.stderr == ""


def test_the_decision_event_reaches_a_stdlib_handler_when_configured(tmp_path):
    script = (
        """
import json, logging, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record)
logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="%(name)s %(levelname)s %(message)s")
logging.getLogger().addHandler(Keep())
"""
        + DECIDE
        + """
events = [r for r in records if getattr(r, "event", None) == "agentbranch.decision"]
out = [{"question_id": r.question_id, "label": r.label, "decided_by": r.decided_by,
        "band": getattr(r, "band", None), "probabilities": r.probabilities, "name": r.name} for r in events]
json.dump(out, open(sys.argv[1], "w"))
"""
    )
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    events = json.loads((tmp_path / "out.json").read_text())
    # engine.decide: one event per question; each tool: one resolved event per question.
    assert [e["question_id"] for e in events] == ["urgent", "team", "urgent", "team", "urgent"]
    assert all(e["name"] == "agentbranch" for e in events)
    assert [e["band"] for e in events] == [None, None, "take", "take", "error"]
    assert [e["decided_by"] for e in events][-1] == "fail_open"
    assert set(events[1]["probabilities"]) == {"billing", "outage"}
    lines = [line for line in done.stderr.splitlines() if "agentbranch.decision " in line]
    assert len(lines) == 5
    assert any(
        line.startswith("agentbranch WARNING agentbranch.decision.error")
        for line in done.stderr.splitlines()
    )
    assert lines[0].startswith("agentbranch INFO agentbranch.decision question_id=urgent type=noul")
    assert "decided_by=engine" in lines[0] and "probabilities={yes:" in lines[0]


def test_os_environ_is_unchanged_by_the_default_engine(tmp_path):
    script = """
import json, os, sys
import torch
# Importing transformers' models sets KMP_INIT_AT_FORK (sklearn, which transformers
# imports) and TORCHINDUCTOR_CACHE_DIR (torch._dynamo): the dependencies' own import-time
# behaviour. Import them first so the snapshot sees only what agentbranch does.
from transformers import AutoModel, AutoTokenizer
before_env, before_threads = dict(os.environ), torch.get_num_threads()
import agentbranch as ab
engine = ab.DecisionEngine.from_env()
decision = engine.decide("I was charged twice", {"team": ab.choice(
    "Which team?", {"billing": "Invoices and refunds", "outage": "The site is down"})})["team"]
after = dict(os.environ)
json.dump({
    "reader": engine.reader.name,
    "forwards": engine.reader.forward_calls,
    "label": decision.label,
    "added": sorted(set(after) - set(before_env)),
    "removed": sorted(set(before_env) - set(after)),
    "changed": sorted(k for k in before_env if k in after and after[k] != before_env[k]),
    "threads_restored": torch.get_num_threads() == before_threads,
}, open(sys.argv[1], "w"))
"""
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["reader"] == "embedded" and out["forwards"] >= 1 and out["label"] == "billing"
    assert out["added"] == [] and out["removed"] == [] and out["changed"] == []
    assert out["threads_restored"]


def test_logging_disable_and_levels_silence_the_library(caplog):
    reader = ab.ScriptedReader({"urgent": {"yes": 0.9, "no": 0.1}})
    caplog.set_level(logging.INFO, logger="agentbranch")
    logging.disable(logging.CRITICAL)
    try:
        ab.DecisionEngine(reader).decide("x", {"urgent": ab.yes_no("Urgent?")})
    finally:
        logging.disable(logging.NOTSET)
    assert caplog.records == []
    logging.getLogger("agentbranch").setLevel(logging.WARNING)
    ab.DecisionEngine(reader).decide("x", {"urgent": ab.yes_no("Urgent?")})
    assert caplog.records == []
    assert any(
        isinstance(h, logging.NullHandler) for h in logging.getLogger("agentbranch").handlers
    )


def test_structlog_users_get_the_event_and_its_key_values():
    import io

    import structlog

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    logger = logging.getLogger("agentbranch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    reader = ab.ScriptedReader({"urgent": {"yes": 0.9, "no": 0.1}})
    ab.DecisionEngine(reader).decide("x", {"urgent": ab.yes_no("Urgent?")})
    event = json.loads(stream.getvalue().splitlines()[-1])
    assert event["event"] == "agentbranch.decision"
    assert event["question_id"] == "urgent" and event["label"] == "yes"
    assert event["probabilities"] == pytest.approx({"yes": 0.9, "no": 0.1})
    assert event["decided_by"] == "engine" and "state" not in event


# -- threads -------------------------------------------------------------------------


def test_threads_are_set_only_around_the_readers_forward(tiny_model_dir):
    import torch

    from agentbranch.engine.readers.threads import resolve_threads

    reader = ab.TransformersReader.from_pretrained(tiny_model_dir, threads=3)
    seen = []
    inner = reader.backend.model.model.forward

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return inner(*args, **kwargs)

    reader.backend.model.model.forward = spy
    before = torch.get_num_threads()
    ab.DecisionEngine(reader).decide("x", {"urgent": ab.yes_no("Urgent?")})
    assert seen == [3] and torch.get_num_threads() == before
    assert resolve_threads(None) is None and resolve_threads(2) == 2
    assert 1 <= resolve_threads("auto") <= 4
    with pytest.raises(ab.ConfigurationError, match="threads"):
        resolve_threads(0)


def test_threads_none_leaves_torch_alone(tiny_model_dir):
    import torch

    reader = ab.TransformersReader.from_pretrained(tiny_model_dir, threads=None)
    seen = []
    inner = reader.backend.model.model.forward
    reader.backend.model.model.forward = lambda *a, **k: (
        seen.append(torch.get_num_threads()),
        inner(*a, **k),
    )[1]
    ab.DecisionEngine(reader).decide("x", {"urgent": ab.yes_no("Urgent?")})
    assert seen == [torch.get_num_threads()]


# -- load and warm-up ----------------------------------------------------------------


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class _SlowLoadReader(ab.ScriptedReader):
    """Loading takes 100 (fake) seconds, a read 1."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__({"urgent": {"yes": 0.9, "no": 0.1}})
        self.clock, self.loads, self.warmups = clock, 0, 0

    def load(self) -> None:
        if not self.loads:
            self.clock.now += 100.0
        self.loads += 1

    def warmup(self) -> None:
        self.load()
        self.warmups += 1

    def read(self, requests):
        self.clock.now += 1.0
        return super().read(requests)


@pytest.mark.parametrize("use_async", [False, True])
async def test_model_load_is_never_counted_in_latency(monkeypatch, use_async):
    clock = _Clock()
    monkeypatch.setattr("agentbranch.engine.engine.time.perf_counter", clock)
    reader = _SlowLoadReader(clock)
    engine = ab.DecisionEngine(reader)
    q = {"urgent": ab.yes_no("Urgent?")}
    first = await engine.adecide("x", q) if use_async else engine.decide("x", q)
    assert first["urgent"].latency_s == 1.0 and first.latency_s == 1.0
    assert reader.loads == 1
    engine.decide("y", q)
    assert reader.loads == 1  # loaded once per engine


def test_warmup_and_eager():
    clock = _Clock()
    reader = _SlowLoadReader(clock)
    engine = ab.DecisionEngine(reader, eager=True)
    assert reader.warmups == 1
    assert engine.warmup() is engine and reader.warmups == 2
    engine.decide("x", {"urgent": ab.yes_no("Urgent?")})
    assert reader.loads == 2  # the engine does not load again after a warm-up
    batching = ab.DecisionEngine(ab.BatchingReader(_SlowLoadReader(clock)), eager=True)
    assert batching.reader.inner.warmups == 1


def test_embedded_warmup_runs_its_forwards_once():
    from agentbranch.engine.readers.embedded import EmbeddedReader

    # the first forward pays the one-off setup, the second makes the traced embedding
    reader = EmbeddedReader(threads=1)
    engine = ab.DecisionEngine(reader).warmup()
    assert reader.forward_calls == 2 and reader.pipelined_batch
    engine.warmup()
    assert reader.forward_calls == 2
    engine.decide("The site is down", {"urgent": ab.yes_no("Urgent?", yes="Production is down")})
    assert reader.forward_calls == 3
    untraced = EmbeddedReader(threads=1, trace=False)
    ab.DecisionEngine(untraced).warmup().warmup()
    assert untraced.forward_calls == 1 and untraced.pipelined_batch is None


def test_docs_are_self_contained():
    """Every design reference points at docs/design.md, which ships with the repo."""
    root = SRC.parent
    assert (root / "docs" / "design.md").is_file()
    files = [root / "README.md", *root.glob("docs/*.md")]
    for folder in ("src", "examples", "tests", "benchmarks"):
        files += (root / folder).rglob("*.py")
    citing = [str(f.relative_to(root)) for f in files if "DESIGN" + ".md" in f.read_text("utf-8")]
    assert citing == []


def test_transformers_warmup_runs_one_forward_once(tiny_model_dir):
    reader = ab.TransformersReader.from_pretrained(tiny_model_dir, threads=1)
    forwards = []
    inner = reader.backend.model.model.forward
    reader.backend.model.model.forward = lambda *a, **k: (forwards.append(1), inner(*a, **k))[1]
    engine = ab.DecisionEngine(reader, eager=True)
    assert len(forwards) == 1
    engine.warmup()
    assert len(forwards) == 1
    engine.decide("x", {"urgent": ab.yes_no("Urgent?")})
    assert len(forwards) == 2


def _modules_loaded_by(imports: str, tmp_path: Path) -> list[str]:
    """The modules a fresh interpreter holds after running the lines ``imports``."""
    script = "import json, sys\n" + imports + "\nprint(json.dumps(sorted(sys.modules)))\n"
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _cli_or_bench(module: str) -> bool:
    """``module`` is the command line (``agentbranch.cli``) or the benchmark harness."""
    return (
        module.split(".")[0] == "agentbranch_bench"
        or module == "agentbranch.cli"
        or module.startswith("agentbranch.cli.")
    )


def test_import_loads_no_cli_plotting_statistics_or_model_runtime(tmp_path):
    # What every CLI run and CI replay job pays first (benchmarks/bench_cold_start.py):
    # these load when used, not at `import agentbranch` (scipy alone cost ~0.6 s; numpy,
    # which only learning a threshold needs, ~0.15 s).
    loaded = _modules_loaded_by("import agentbranch", tmp_path)
    heavy = {"matplotlib", "typer", "scipy", "numpy", "torch", "transformers"}
    assert [m for m in loaded if m in heavy or _cli_or_bench(m)] == []


def test_public_packages_load_neither_the_cli_nor_the_bench_harness(tmp_path):
    # The command line (agentbranch.cli, typer) and the benchmark harness
    # (agentbranch_bench) sit above the library: no public package imports them.
    public = (
        "import agentbranch.audit, agentbranch.deploy, agentbranch.langchain\n"
        "import agentbranch.langgraph, agentbranch.policy, agentbranch.replay"
    )
    loaded = _modules_loaded_by(public, tmp_path)
    assert [m for m in loaded if m == "typer" or _cli_or_bench(m)] == []


def test_importing_the_vllm_reader_loads_neither_vllm_nor_torch(tmp_path):
    # vLLM (and the torch under it) load when a VLLMReader builds an LLM or sends
    # requests, not when selection, the CLI or a user imports the reader package.
    script = """
        import json, pkgutil, sys
        import agentbranch.engine.readers.vllm as package
        for module in pkgutil.iter_modules(package.__path__):
            __import__(f"{package.__name__}.{module.name}")
        print(json.dumps(sorted(m for m in ("vllm", "torch") if m in sys.modules)))
    """
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == []
