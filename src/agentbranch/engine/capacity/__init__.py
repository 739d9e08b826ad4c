"""Capacity planning for a served DiffusionGemma: the sizing formula and the start-up check.

``sizing`` turns a model shape, a GPU and a canvas into how many sequences one denoising
step holds; ``check`` compares a running engine's settings against it.
"""

__all__: list[str] = []
