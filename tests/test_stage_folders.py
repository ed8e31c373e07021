"""The table of stage folders: names, markers, record classes, and the advice the CLI adds."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from pipeline.errors import DamagedFileError, MissingFileError, WikidriftError
from pipeline.layout import read_marker
from pipeline.markers import LabelSummary
from pipeline.stage_folders import STAGE_FOLDERS, rebuild_advice, stage_file
from pipeline.storage import SchemaVersionError


def test_every_folder_is_named_by_its_root_and_read_by_its_record(tmp_path: Path) -> None:
    assert list(STAGE_FOLDERS) == [
        "snapshots", "labels", "generated", "ledger", "temporal", "releases"
    ]  # fmt: skip
    for root, folder in STAGE_FOLDERS.items():
        assert folder.root == root
        assert folder.path(tmp_path) == tmp_path / root
        key = "2024-01-01__2024-06-01" if folder.key == "<old>__<new>" else "2024-06-01"
        found = stage_file(folder.path(tmp_path, key) / "table.parquet")
        assert found is not None and found.kind is folder and found.key == key
        assert found.marker == tmp_path / root / key / folder.marker
    # a work area or a copy beside the stage folders is no stage folder
    assert stage_file(tmp_path / "labels" / ".2024-06-01.tmp" / "x.parquet") is None
    assert stage_file(tmp_path / "cache" / "2024-06-01" / "x.sqlite") is None


def test_the_table_record_reads_the_marker_a_stage_writes(tmp_path: Path) -> None:
    folder = STAGE_FOLDERS["labels"]
    assert folder.record is LabelSummary
    path = folder.path(tmp_path, "2024-01-01__2024-06-01") / folder.marker
    path.parent.mkdir(parents=True)
    written = LabelSummary(
        old="2024-01-01", new="2024-06-01", inputs_digest="d", counts={"changed": 2},
        pages={}, model_calls={}, settings={}, models={}, outputs={"a.parquet": "0" * 64},
    )  # fmt: skip
    path.write_text(json.dumps(asdict(written)))
    assert read_marker(path, folder.record) == written


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        (
            MissingFileError("x", path="{w}/snapshots/2024-06-01/sentences.parquet"),
            "; build it with `wikidrift snapshot --date 2024-06-01 --workdir {w} --force` "
            "(with the --source / --input / --config it was built from)",
        ),
        (
            DamagedFileError("x", path="{w}/labels/2024-01-01__2024-06-01/summary.json"),
            "; rebuild it with `wikidrift label --old 2024-01-01 --new 2024-06-01 --workdir {w} "
            "--force`",
        ),
        (
            SchemaVersionError("x", path="{w}/ledger/2024-06-01/items.parquet"),
            "; or rebuild it with `wikidrift release --snapshot 2024-06-01 --workdir {w}`",
        ),
        (
            DamagedFileError("x", path="{w}/releases/2024-06-01/qa.parquet"),
            "; rebuild it with `wikidrift release --snapshot 2024-06-01 --workdir {w} --force`",
        ),
        (DamagedFileError("x", path="{w}/config.yaml"), ""),  # no stage writes it
        (DamagedFileError("x"), ""),  # names no file
        (WikidriftError("x", path="{w}/snapshots/2024-06-01/sentences.parquet"), ""),
        (ValueError("x"), ""),
    ],
    ids=["missing", "damaged", "newer", "release", "outside", "no-path", "no-remedy", "other"],
)
def test_the_advice_names_the_command_that_writes_the_file(
    tmp_path: Path, error: BaseException, advice: str
) -> None:
    path = getattr(error, "path", None)
    if path is not None:
        error.path = Path(str(path).format(w=tmp_path))  # type: ignore[attr-defined]
    assert rebuild_advice(error) == advice.format(w=tmp_path)
