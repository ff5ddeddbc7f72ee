#!/usr/bin/env python3
"""Download a registry model: `python scripts/download_model.py NAME[:QUANT] [--local-dir DIR] [--revision REV]`.

A thin argparse wrapper over `hermes_local.models.download.download_model`, the same function behind
`hermes-local models download`; runnable from a checkout without installing the package.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a checkout: import hermes_local from here

from hermes_local.errors import UserError  # noqa: E402
from hermes_local.models.download import download_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Download a hermes-local registry model (see models.toml).")
    parser.add_argument("model", help="registry NAME[:QUANT], e.g. hermes-3-llama-3.1-8b or hermes-2-pro:Q5_K_M")
    parser.add_argument("--local-dir", type=Path, help="put the file here instead of the Hugging Face cache")
    parser.add_argument("--revision", help="branch, tag or commit (default: the registry's pin, else main)")
    args = parser.parse_args(argv)
    try:
        path = download_model(
            args.model, local_dir=args.local_dir, revision=args.revision, log=lambda m: print(m, file=sys.stderr)
        )
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
