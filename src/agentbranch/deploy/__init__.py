"""Deploying DiffusionGemma for decisions: ``size(...)`` says how many concurrent sequences
(``max_num_seqs``) one GPU holds for a served canvas; ``schema_canvas(...)`` which canvas a
question schema needs; ``deploy.kserve`` writes the InferenceService for a plan (docs/vllm.md,
"Sizing")."""

from agentbranch.deploy.schema import SchemaCanvas, load_questions, schema_canvas
from agentbranch.engine.capacity.shapes import DIFFUSIONGEMMA_26B, ModelShape
from agentbranch.engine.capacity.sizing import SizingPlan, Term, size

__all__ = [
    "DIFFUSIONGEMMA_26B",
    "ModelShape",
    "SchemaCanvas",
    "SizingPlan",
    "Term",
    "load_questions",
    "schema_canvas",
    "size",
]
