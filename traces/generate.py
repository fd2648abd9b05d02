"""Regenerate the shipped traces from the synthetic presets, with fixed seeds.

    PYTHONPATH=. python traces/generate.py           # (re)write every shipped trace
    PYTHONPATH=. python traces/generate.py --check   # compare them with a fresh generation

Same code + seed -> the same rows, bit for bit (tests/traces/test_shipped.py checks the data);
the CSV bytes are identical everywhere, the Parquet bytes with the same pyarrow version (its
version is written into the file's metadata).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The paper's batch shape and maxima (§8, App. A.2): 512 prompts x 16 samples, 2K / 16K tokens.
PAPER_SHAPE = dict(prompts_per_step=512, samples_per_prompt=16, max_prompt_len=2048)

# file name -> (preset, synthesize arguments). Seeds are fixed: changing one changes a file.
SHIPPED = {
    "dapo-math.parquet": (
        "dapo-math",
        dict(steps=20, max_response_len=16384, seed=2510, **PAPER_SHAPE),
    ),
    "tool-calling.parquet": (
        "tool-calling",
        dict(steps=20, max_response_len=16384, seed=12633, **PAPER_SHAPE),
    ),
    # A small human-readable sample (4 steps x 32 prompts x 8 samples) for eyeballing and docs.
    "dapo-math-small.csv": (
        "dapo-math",
        dict(
            steps=4,
            prompts_per_step=32,
            samples_per_prompt=8,
            max_prompt_len=2048,
            max_response_len=16384,
            seed=7,
        ),
    ),
}


def build(name: str):
    """The DataFrame of shipped trace ``name``."""
    from laminar.traces import synthesize

    preset, kwargs = SHIPPED[name]
    return synthesize(preset, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    from laminar.traces import read_trace, write_trace

    failed = 0
    for name in SHIPPED:
        df = build(name)
        path = HERE / name
        if not args.check:
            write_trace(df, path)
            print(f"wrote {path.relative_to(HERE.parent)} ({len(df):,} rows)")
            continue
        same = path.exists() and read_trace(path).equals(df)
        failed += not same
        print(f"{name}: {'same rows' if same else 'DIFFERENT ROWS'}, {_bytes_note(df, path)}")
    return 1 if failed else 0


def _bytes_note(df, path: Path) -> str:
    import filecmp
    import tempfile

    from laminar.traces import write_trace

    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / path.name
        write_trace(df, fresh)
        same = path.exists() and filecmp.cmp(fresh, path, shallow=False)
    return "same bytes" if same else "different bytes"


if __name__ == "__main__":
    sys.exit(main())
