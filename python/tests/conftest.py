"""Shared fixtures: the repository, the shared inputs beside it, the CLI."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def shared(relative: str) -> Path:
    """A file of ../shared/; a missing one fails the test (never a skip)."""
    path = SHARED / relative
    if not path.exists():
        pytest.fail(f"{path} is missing: the shared inputs are needed beside the repository")
    return path


@pytest.fixture(scope="session")
def cli() -> Path:
    """The CLI binary to compare with: $ELEVATOR_CLI, else the newest of the
    workspace's builds. Missing, the comparison fails: it never passes
    without having compared."""
    env = os.environ.get("ELEVATOR_CLI")
    if env:
        return Path(env)
    built = [
        p
        for p in (REPO / "target" / d / "elevator" for d in ("release", "ci", "debug"))
        if p.exists()
    ]
    if not built:
        pytest.fail("no elevator CLI: build it (cargo build --release -p elevator-cli) or set ELEVATOR_CLI")
    return max(built, key=lambda p: p.stat().st_mtime)


def run_cli(cli: Path, *args: str) -> str:
    out = subprocess.run([str(cli), *args], capture_output=True, text=True)
    assert out.returncode == 0, f"elevator {' '.join(args)}: {out.stderr}"
    return out.stdout
