"""Atomic folder writes: they follow the umask, and what a kill leaves is undone."""

from __future__ import annotations

import os
import stat

import polars as pl
import pytest

from builder.bench import Bench
from builder.publish.beir import write_beir
from builder.util.atomic import recover, replace_dir, temp_dir_beside


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_output_and_checkpoint_folders_follow_the_umask(tmp_path, umask_022):
    bench = Bench.of(pl.DataFrame({"doc_id": ["a"], "text": ["x"]}))
    write_beir(bench, tmp_path / "out")
    bench.save(tmp_path / "runs" / "01_x")
    assert _mode(tmp_path / "out") == 0o755
    assert _mode(tmp_path / "runs" / "01_x") == 0o755


def test_recover_removes_temp_folders_and_restores_a_lost_swap(tmp_path):
    out = tmp_path / "out"
    old = tmp_path / f".out.old-{os.getpid() + 1}"
    old.mkdir()
    (old / "corpus.jsonl").write_text("previous")
    temp_dir_beside(out)
    other = tmp_path / ".outer.tmp-1-ab"  # another folder's left-over is not ours to touch
    other.mkdir()
    notes = recover(out)
    assert (out / "corpus.jsonl").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".outer.tmp-1-ab", "out"]
    assert len(notes) == 2 and "restored out" in notes[1]


def test_recover_drops_a_stale_copy_when_the_output_exists(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / ".out.old-99").mkdir()
    recover(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replace_dir_swaps_whole_folders(tmp_path):
    dst, src = tmp_path / "d", temp_dir_beside(tmp_path / "d")
    (src / "f").write_text("new")
    dst.mkdir()
    replace_dir(src, dst)
    assert (dst / "f").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["d"]
