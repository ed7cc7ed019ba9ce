"""Local against Ray with two workers on this machine: the three figures of the scale-out.

  spans     fuzzy span localization over (reference, document) pairs: Python-bound work
            one process cannot spread (target: Ray at least 1.6x faster)
  counting  load + token counting + sampling over a large corpus: the tokenizer already
            uses every core, so the target is bounded overhead (Ray at least 0.8x local)
            and the driver's peak memory
  llm       an LLM build against the test server (target: Ray within 10% of local)

Each part is its own script (scale_out_<part>.py) with its own options; this runs them
one after another at the sizes the issue names, or small with --quick.

    PYTHONPATH=. python benchmarks/scale_out.py [--parts spans,counting,llm] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FULL = {"spans": ["--pairs", "20000"], "counting": ["--docs", "200000"], "llm": ["--docs", "60"]}
QUICK = {"spans": ["--pairs", "500"], "counting": ["--docs", "2000"], "llm": ["--docs", "8", "--repeats", "1"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="spans,counting,llm")
    parser.add_argument("--quick", action="store_true", help="small sizes: checks the scripts, not the figures")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for part in args.parts.split(","):
        print(f"== {part}", flush=True)
        # A fresh process per part, so one part's Ray instance and memory do not touch the next.
        subprocess.run([sys.executable, str(HERE / f"scale_out_{part}.py"), *sizes[part]], check=True)


if __name__ == "__main__":
    main()
