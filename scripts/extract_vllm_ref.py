"""Extract vLLM 0.33's pure-Python decisions sources from a ``vllm==0.33.0`` wheel, for
the vLLM tier's parity tests (``scripts/vllm_tier.sh``, ``scripts/vllm_gpu.sh``).

    python scripts/extract_vllm_ref.py WHEEL OUT_DIR
"""

import sys
import zipfile
from pathlib import Path

KEEP = (
    "vllm/entrypoints/openai/decisions/",
    "vllm/entrypoints/generate/label_reads.py",
    "vllm/utils/diffusion.py",
)


def main() -> None:
    wheel, out = sys.argv[1], Path(sys.argv[2])
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.startswith(KEEP) and n.endswith(".py")]
        if len(names) < 5:
            raise SystemExit(f"{wheel} lacks vLLM's decisions sources: {names}")
        for name in names:
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
    print(f"extracted {len(names)} files from {wheel}", file=sys.stderr)


if __name__ == "__main__":
    main()
