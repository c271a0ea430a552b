"""Exports never overwrite without being asked, and report file names keep the notebook's
name, non-ASCII letters included, without two notebooks sharing one (issue 21, item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_export import make_report
from vramscope.exports import render, render_samples_csv, write_report
from vramscope.exports.request import MAX_STEM_BYTES, report_filename


def test_an_existing_report_is_kept_unless_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    target.write_bytes(b"the user's own file")
    report = make_report(["x = 1"])
    with pytest.raises(FileExistsError, match=r"r\.html already exists: pass overwrite=True"):
        write_report(report, target)
    assert target.read_bytes() == b"the user's own file"
    assert write_report(report, target, overwrite=True) == [target]
    assert target.read_text(encoding="utf-8") == render(report, "html")


def test_the_samples_sibling_is_never_overwritten_either(tmp_path: Path) -> None:
    target, sibling = tmp_path / "x.csv", tmp_path / "x.samples.csv"
    sibling.write_bytes(b"kept")
    report = make_report(["x = 1"])
    with pytest.raises(FileExistsError, match=r"x\.samples\.csv already exists"):
        write_report(report, target, samples=True)
    assert not target.exists() and sibling.read_bytes() == b"kept"  # nothing written
    assert write_report(report, tmp_path / "y.csv", samples=True)  # new names: written
    assert write_report(report, target, samples=True, overwrite=True) == [target, sibling]
    assert sibling.read_bytes() == render_samples_csv(report).encode("utf-8")


def test_a_symlink_in_the_way_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not ours")
    (tmp_path / "r.json").symlink_to(outside)
    with pytest.raises(FileExistsError):
        write_report(make_report(["x"]), tmp_path / "r.json")
    assert outside.read_bytes() == b"not ours"


NAMES = [
    "a b.ipynb",
    "a_b.ipynb",
    "a?b.ipynb",
    "a:b.ipynb",
    "été.ipynb",
    "ete.ipynb",
    "模型训练.ipynb",
    "模型.ipynb",
    "Ünïcødé notes.ipynb",
    "report.ipynb",
    "report .ipynb",
    "con.ipynb",
    "a\u202egnp.ipynb",
    "x" * 300 + ".ipynb",
    "x" * 299 + "y.ipynb",
    "模" * 200 + ".ipynb",
]


def test_report_names_keep_the_stem_and_never_collide() -> None:
    names = [report_filename(f"dir/{n}", "html") for n in NAMES]
    assert len(set(names)) == len(NAMES), names
    kept = dict(zip(NAMES, names))
    # a legal stem is kept as it is: spaces and non-ASCII letters included
    for stem in ("a b", "a_b", "été", "模型训练", "Ünïcødé notes", "report"):
        assert kept[f"{stem}.ipynb"] == f"{stem}.vramscope.html"
    for name in names:  # a plain file name every common file system takes
        stem = name[: -len(".vramscope.html")]
        assert not set(stem) & set('<>:"/\\|?*\u202e') and not stem.startswith(".")
        assert len(stem.encode("utf-8")) <= MAX_STEM_BYTES + 9
        assert name.split(".")[0].upper() != "CON"
    assert kept["a?b.ipynb"].startswith("a_b-") and kept["模" * 200 + ".ipynb"].startswith("模")
    assert report_filename(None, "csv") == "session.vramscope.csv"
