"""The cassette format's one schema: every line a cassette file may hold, as strict
pydantic models (format 2, format 1's header and pre-v1 lines); ``describe`` turns
pydantic's errors into the field path and message ``CassetteFormatError`` shows.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from agentbranch.policy.trust import Trust

Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
LogProb = Annotated[float, Field(allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1)]
#: At least two options per read: one option cannot be a question (0 divided the work).
MaxOptions = Annotated[int, Field(ge=2)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _Open(BaseModel):
    """A readable summary: known fields are typed, further ones are kept."""

    model_config = ConfigDict(strict=True, extra="allow")


class StoredRead(_Strict):
    """One read (``null`` log-probability: a label the model gave no probability;
    ``calibrated`` is written only when the reader calibrated it)."""

    logprobs: list[LogProb | None] = Field(min_length=1)
    label_mass: Probability | None  # null: the reader did not know it
    argmax_is_label: bool
    agreement: Probability
    calibrated: bool = False


class QuestionSummary(_Open):
    id: str
    type: str | None = None
    text: str | None = None
    options: list[str] | None = None
    details_sha: str | None = None
    examples: list[int] | None = None
    examples_sha: list[str] | None = None


class RequestSummary(_Open):
    state: str
    questions: list[QuestionSummary]
    state_sha: str | None = None
    instructions: str | None = None
    instructions_sha: str | None = None
    draws: Annotated[int, Field(ge=1)] | None = None
    joint: bool | None = None


# -- format 2 ----------------------------------------------------------------------------


class Header(_Strict):
    """Line 1 of a format-2 cassette; ``recording`` names the run that started the file."""

    agentbranch_cassette: Literal[2]
    library: str
    recording: str | None = None


class ReaderLine(_Strict):
    """Declares reader ``id``: which reader and model recorded its reads."""

    kind: Literal["reader"]
    id: Name
    name: str
    model: str
    max_options: MaxOptions


class ChatModelLine(_Strict):
    """Declares chat model ``id`` (a digest of its ``llm_string``)."""

    kind: Literal["chat_model"]
    id: Name
    name: str
    llm_string: str


class ReadLine(_Strict):
    kind: Literal["read"]
    reader: Name
    key: Name
    request: RequestSummary
    reads: list[StoredRead]

    @model_validator(mode="after")
    def _one_read_per_question(self) -> ReadLine:
        if len(self.reads) != len(self.request.questions):
            raise ValueError(f"{len(self.reads)} reads for {len(self.request.questions)} questions")
        return self


class ChatLine(_Strict):
    kind: Literal["chat"]
    model: Name
    key: Name
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]


class ThresholdLine(_Strict):
    """The threshold an ``Earned`` policy had in force for one recorded decision."""

    kind: Literal["threshold"]
    key: Name
    take_at: Probability | None
    trust: Trust


class VersionLine(_Strict):
    """The version of a learning question's read in force for one recorded decision: its
    index, the wire dicts of its question and of the question read (``None``: the
    version's own), and the probability map in force (``None``: none)."""

    kind: Literal["version"]
    key: Name
    version: int = Field(ge=0)
    asked: dict[str, Any] | None
    read: dict[str, Any] | None
    probability_map: list[LogProb] | None = Field(default=None, min_length=4, max_length=4)


class TeacherLine(_Strict):
    """One teacher call a policy made that is not a chat model's cached exchange; ``reply``
    is ``{"message": <LangChain message dict>}``, ``{"text": str}`` or ``{"json": value}``."""

    kind: Literal["teacher"]
    role: Literal["generate", "audit", "review"]
    question: str
    teacher: Name
    key: Name
    input: list[dict[str, Any]] | dict[str, Any]
    reply: dict[str, Any]


class SampleLine(_Strict):
    """Whether one recorded decision was audited (an ``Audit``'s draw)."""

    kind: Literal["sample"]
    key: Name
    audited: bool


AnyLine = (
    ReaderLine
    | ChatModelLine
    | ReadLine
    | ChatLine
    | ThresholdLine
    | VersionLine
    | TeacherLine
    | SampleLine
)
Line = Annotated[AnyLine, Field(discriminator="kind")]
LINE: TypeAdapter[AnyLine] = TypeAdapter(Line)
KINDS = ("reader", "chat_model", "read", "chat", "threshold", "version", "teacher", "sample")


# -- format 1 and before ----------------------------------------------------------------


class ReaderInfoV1(_Strict):
    name: str
    model: str
    max_options: MaxOptions


class ChatModelInfoV1(_Strict):
    name: str
    llm_string: str


class HeaderV1(_Strict):
    agentbranch_cassette: Literal[1]
    library: str = "unknown"
    readers: dict[str, ReaderInfoV1]
    chat_models: dict[str, ChatModelInfoV1]


class LegacyLine(_Open):
    """One line of a pre-v1 cassette (no header)."""

    key: str
    reader: str
    model: str
    state: str
    questions: list[Any]
    reads: list[StoredRead]


# -- errors -----------------------------------------------------------------------------


def describe(error: ValidationError) -> str:
    """``field: message`` for the first problems pydantic found (the field as a path,
    ``reads[0].label_mass``)."""
    parts = []
    for e in error.errors(include_url=False)[:3]:
        path = list(e["loc"])
        if len(path) > 1 and path[0] in KINDS:  # the tag of the line union, not a field
            path = path[1:]
        loc = ""
        for p in path:
            loc += f"[{p}]" if isinstance(p, int) else f".{p}" if loc else str(p)
        got = e.get("input")
        shown = (
            "" if e["type"] == "missing" or isinstance(got, dict | list) else f" (got {got!r:.60})"
        )
        parts.append(f"field {loc or '(line)'!r}: {e['msg']}{shown}")
    return "; ".join(parts)


__all__ = [
    "KINDS",
    "LINE",
    "ChatLine",
    "ChatModelLine",
    "Header",
    "HeaderV1",
    "LegacyLine",
    "ReadLine",
    "ReaderLine",
    "RequestSummary",
    "SampleLine",
    "StoredRead",
    "TeacherLine",
    "VersionLine",
    "describe",
]
