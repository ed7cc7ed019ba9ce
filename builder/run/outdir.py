"""Checks on the output folder, made before any work: a build replaces its output whole,
so it must never be pointed at a folder holding anything but an earlier build's output."""

from __future__ import annotations

from pathlib import Path

from builder.records.marker import MARKER


class OutDirError(RuntimeError):
    """The output folder cannot be used; the message says why and what to do."""


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def out_dir_problem(out_dir: Path) -> str | None:
    """Why the swap would destroy something at `out_dir` wherever the run folder is: it is
    a file, `/`, or the working directory or one of its parents (`validate` checks this too)."""
    if (out_dir.exists() or out_dir.is_symlink()) and not out_dir.is_dir():
        return f"output folder {out_dir} is an existing file, not a folder; pick a folder path"
    target = out_dir.resolve()
    if target == Path(target.anchor):
        return f"output folder {out_dir} is the root of the file system; pick a new folder"
    if _is_within(Path.cwd().resolve(), target):
        return (
            f"output folder {out_dir} is the working directory or one of its parents; "
            "the build replaces its output folder whole, so pick a new folder"
        )
    return None


def check_out_dir_place(out_dir: Path, run_root: Path, run_dir: Path) -> None:
    """Refuse a path the swap would destroy something at (see `out_dir_problem`), or a
    folder holding the run folder."""
    if (problem := out_dir_problem(out_dir)) is not None:
        raise OutDirError(problem)
    target = out_dir.resolve()
    if _is_within(run_root.resolve(), target) or _is_within(target, run_dir.resolve()):
        raise OutDirError(
            f"output folder {out_dir} would hold or sit inside the run folder {run_root}; pick a folder outside it"
        )


def check_out_dir_contents(out_dir: Path, overwrite: bool) -> None:
    """A folder is replaced only when empty or written by an earlier build (it has the marker)."""
    if overwrite or not out_dir.is_dir() or (out_dir / MARKER).is_file():
        return
    if next(out_dir.iterdir(), None) is not None:
        raise OutDirError(
            f"output folder {out_dir} is a folder that build-bench did not write and it is not "
            "empty; its contents would be replaced. Pick a new folder, or pass "
            "--overwrite to replace it anyway"
        )
