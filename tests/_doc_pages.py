"""The snippets of README.md and docs/*.md, as tests/test_docs.py runs them.

A page is read as its reader would run it: top to bottom, every ```python block in one
namespace, in one fresh process, in an empty temporary directory (its *session*). A
```text block is the output of the code block before it (prose may come between, no other
fenced block). What a block needs beyond its text is said in an HTML comment right above
it (invisible on the rendered page), ``<!-- doc-test: DIRECTIVE; DIRECTIVE ... -->``:

``skip REASON``       the block does not run (every ```python block runs unless it says why)
``isolated``          runs in a process of its own (it configures logging, say)
``setup NAME``        ``_doc_hooks.NAME(namespace)`` first: names the block uses but the
                      page does not define (``chat_model``)
``check NAME``        ``_doc_hooks.NAME(namespace)`` after it: what it must have built
``creates FILE ...``  the block leaves these files in the session directory
``file PATH``         not run: written to PATH in the session directory before the session
                      starts (a test file the page's commands run; a ```json block, a data
                      file its code reads: it must parse)
``scenario NAME``     ``_doc_hooks.NAME(block_text, namespace)`` stands for the block (what
                      the page describes in prose: run pytest twice, reword a question);
                      on a ```text block, what it prints is compared with the block
``excerpt PAGE PATH`` not run: every line is in PAGE's ``file PATH`` block (tested there)
``lines``             on an output block: each line it shows is printed (the output holds
                      more, e.g. a pytest report); without it the output must be equal
``stderr``            on an output block: it shows what the block prints on stderr (a log
                      handler's lines); without it, what it prints on stdout

```bash blocks run (their ``agentbranch ...`` lines, as ``python -m agentbranch.cli``)
when they show an output or name a scenario; a ```console block starting with
``$ [VAR=value ...] agentbranch ...`` runs that command and shows the rest of the block as
its output (with ``scenario NAME``, the scenario's output instead). Latencies
(``latency_s``, and the demo's "median read: N ms" and "median teacher: N ms") and the
cassette line of a replay miss's nearest call are masked on both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DIRECTIVE = re.compile(r"^<!-- doc-test: (.*?) -->$")
KNOWN = {
    *("skip", "isolated", "setup", "check", "creates", "file", "scenario", "excerpt"),
    *("lines", "stderr"),
}


@dataclass
class Block:
    """One fenced block of a page and its ``doc-test`` directives."""

    page: str  # "README.md", "docs/audit.md"
    line: int  # of the opening fence
    lang: str
    body: str
    directives: dict[str, str] = field(default_factory=dict)
    output: Block | None = None  # the ```text block showing what it prints

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        """A step of its page's session (rather than a skipped or never-run block)."""
        if "skip" in self.directives or "excerpt" in self.directives:
            return False
        if self.lang == "python" or "scenario" in self.directives:
            return True
        if self.lang == "bash":
            return self.output is not None
        return self.lang == "console" and self.body.startswith("$ ")

    @property
    def session(self) -> str:
        return f"{self}" if "isolated" in self.directives else self.page

    @property
    def expected(self) -> str | None:
        """The output the page shows for this block, if any."""
        if self.output is not None:
            return self.output.body
        if self.lang in ("text", "console") and "scenario" in self.directives:
            return self.body
        if self.lang == "console":
            return self.body.split("\n", 1)[1] if "\n" in self.body else ""
        return None

    @property
    def compare_lines(self) -> bool:
        shown = self.output if self.output is not None else self
        return "lines" in shown.directives

    @property
    def stream(self) -> str:
        shown = self.output if self.output is not None else self
        return "stderr" if "stderr" in shown.directives else "stdout"


def _directives(comment: str, where: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in comment.split(";"))):
        key, _, value = part.partition(" ")
        if key not in KNOWN:
            raise ValueError(f"{where}: unknown doc-test directive {key!r} (known: {KNOWN})")
        out[key] = value.strip()
    return out


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, text blocks paired with the code they show."""
    page = str(path.relative_to(ROOT))
    lines = path.read_text("utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)", lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i] != "```":
            i += 1
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        d = DIRECTIVE.match(lines[before]) if before >= 0 else None
        block = Block(page, start + 1, m.group(1), "\n".join(lines[start + 1 : i]) + "\n")
        if d:
            block.directives = _directives(d.group(1), str(block))
        if (
            block.lang == "text"
            and "scenario" not in block.directives
            and found
            and found[-1].lang in ("python", "bash")
            and found[-1].output is None
            and "file" not in found[-1].directives
        ):
            found[-1].output = block
        found.append(block)
        i += 1
    return found


def snippets() -> list[Block]:
    """The blocks tests/test_docs.py collects, in page order: every ```python block, every
    block that runs, every excerpt."""
    return [
        b
        for path in PAGES
        for b in blocks(path)
        if b.lang == "python" or b.runs or "excerpt" in b.directives or "file" in b.directives
    ]


def sessions() -> dict[str, list[Block]]:
    """Session name → its steps and file blocks, in page order."""
    out: dict[str, list[Block]] = {}
    for b in snippets():
        if b.runs or "file" in b.directives:
            out.setdefault(b.session, []).append(b)
    return out


def find(page: str, file: str) -> Block:
    """The ``file PATH`` block of a page."""
    for b in blocks(ROOT / page):
        if b.directives.get("file") == file:
            return b
    raise LookupError(f"{page} has no block marked 'file {file}'")


def mask(text: str) -> str:
    text = re.sub(r'(latency_s"?[=:] ?)[0-9.e-]+', r"\1<t>", text)
    # the demo's timings: "median read: 12 ms", "median teacher: 0.03 ms"
    text = re.sub(r"(median (read|teacher): )[0-9.]+ ms", r"\1<t> ms", text)
    # where a replay miss's nearest call sits in a cassette that threads (an audit
    # worker beside the run) append to in either order
    return re.sub(r"(Nearest recorded [^(\n]*\(line )\d+", r"\1<n>", text)
