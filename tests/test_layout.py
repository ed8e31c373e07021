"""pipeline.layout on small hand-built workdirs: folder paths, input and output fingerprints,
done-markers, the layout version, and the readers and listings of each stage folder."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.errors import DamagedFileError, MissingFileError, NewerWorkdirError, WikidriftError
from pipeline.layout import (
    VERSION_FILE,
    WORKDIR_VERSION,
    cache_dir,
    check_release,
    check_workdir,
    claim_workdir,
    default_annotations_root,
    done_before,
    evaluations_dir,
    generated_dir,
    is_complete,
    labels_dir,
    ledger_dir,
    ledger_previous,
    ledger_snapshots,
    list_releases,
    list_snapshots,
    locks_dir,
    logs_dir,
    output_fingerprints,
    outputs_intact,
    own_marker,
    previous_release,
    read_evidence,
    read_generated,
    read_generation_summary,
    read_items,
    read_label_summary,
    read_labels,
    read_ledger_summary,
    read_manifest,
    read_marker,
    read_questions,
    read_release_table,
    read_snapshot_summary,
    read_snapshot_table,
    release_dir,
    releases_root,
    sentence_texts,
    snapshot_dir,
    temporal_dir,
    verified_inputs,
)
from pipeline.markers import LabelSummary, LedgerSummary, ReleaseManifest, SnapshotSummary
from pipeline.schemas import (
    GENERATED_TABLES,
    LABELS_SCHEMA,
    LEDGER_EVIDENCE_SCHEMA,
    LEDGER_ITEMS_SCHEMA,
    RELEASE_TABLES,
    SENTENCES_SCHEMA,
    TEMPORAL_QUESTIONS_SCHEMA,
)
from pipeline.stage_folders import rebuild_advice
from pipeline.storage import file_sha256, write_json_atomic, write_parquet_atomic

OLD, NEW = "2024-01-01", "2024-06-01"


def shown(error: WikidriftError) -> str:
    """The error as the CLI prints it: its message and what to run about its file."""
    return f"{error}{rebuild_advice(error)}"


def _sentences_snapshot(workdir: Path, snapshot: str) -> Path:
    """A complete snapshot folder holding only sentences.parquet (two pages)."""
    folder = snapshot_dir(workdir, snapshot)
    rows = [
        {"page_id": 1, "sent_idx": 0, "text": "One a."},
        {"page_id": 1, "sent_idx": 1, "text": "One b."},
        {"page_id": 2, "sent_idx": 0, "text": "Two a."},
    ]
    write_parquet_atomic(
        pa.Table.from_pylist(rows, schema=SENTENCES_SCHEMA),
        folder / "sentences.parquet",
        table_name="sentences",
        schema_version=1,
    )
    summary = SnapshotSummary(
        snapshot=snapshot,
        source="wikisnap:x",
        selection_digest="sel",
        text_version="t",
        articles=2,
        sentences=3,
        outputs=output_fingerprints(folder, ["sentences.parquet"]),
    )
    write_json_atomic(folder / "snapshot.json", asdict(summary))
    return folder


def _labels(workdir: Path, digest: str = "digest-1") -> tuple[Path, LabelSummary]:
    """A finished labeling run of OLD -> NEW with its summary.json."""
    folder = labels_dir(workdir, OLD, NEW)
    rows = [
        {"page_id": 1, "new_idx": 0, "old_idx": [0], "label": "unchanged"},
        {"page_id": 2, "new_idx": 0, "old_idx": [], "label": "new"},
    ]
    write_parquet_atomic(
        pa.Table.from_pylist(rows, schema=LABELS_SCHEMA),
        folder / "sentence_labels.parquet",
        table_name="sentence_labels",
        schema_version=1,
    )
    (folder / "report.txt").write_text("two pages\n")
    summary = LabelSummary(
        old=OLD,
        new=NEW,
        inputs_digest=digest,
        counts={"unchanged": 1, "new": 1},
        pages={},
        model_calls={},
        settings={},
        models={},
        outputs=output_fingerprints(folder, ["sentence_labels.parquet", "report.txt"]),
    )
    write_json_atomic(folder / "summary.json", asdict(summary))
    return folder, summary


def _release(workdir: Path, snapshot: str) -> Path:
    """A release folder with one qa row and a manifest listing qa.parquet's sha256."""
    folder = release_dir(workdir, snapshot)
    qa = RELEASE_TABLES["qa"]
    write_parquet_atomic(
        pa.Table.from_pylist([{"page_id": 7, "question": "Q?"}], schema=qa.schema),
        folder / "qa.parquet",
        table_name=qa.stored_name,
        schema_version=3,
    )
    manifest = ReleaseManifest(
        release_id=f"wikidrift-{snapshot}",
        snapshot=snapshot,
        revision=1,
        previous_release=None,
        schema_version=3,
        inputs_digest="d",
        config={},
        config_hash="h",
        models={},
        prompt_hashes={},
        labeling_rule="growover",
        counts={},
        files={"qa.parquet": {"sha256": file_sha256(folder / "qa.parquet"), "rows": 1}},
    )
    write_json_atomic(folder / "manifest.json", asdict(manifest))
    return folder


def _ledger_state(workdir: Path, snapshot: str, previous: str | None) -> None:
    summary = LedgerSummary(snapshot=snapshot, previous=previous, inputs_digest="d")
    write_json_atomic(ledger_dir(workdir, snapshot) / "state.json", asdict(summary))


def test_stage_folders_and_shared_folders_lie_under_the_workdir(tmp_path: Path) -> None:
    w = tmp_path / "w"
    assert snapshot_dir(w, date(2024, 6, 1)) == w / "snapshots" / NEW
    assert snapshot_dir(str(w), NEW) == w / "snapshots" / NEW
    assert labels_dir(w, OLD, NEW) == w / "labels" / "2024-01-01__2024-06-01"
    assert generated_dir(w, NEW) == w / "generated" / NEW
    assert ledger_dir(w, NEW) == w / "ledger" / NEW
    assert temporal_dir(w, NEW) == w / "temporal" / NEW
    assert releases_root(w) == w / "releases"
    assert release_dir(w, NEW) == w / "releases" / NEW
    assert logs_dir(w) == w / "logs"
    assert locks_dir(w) == w / "locks"
    assert evaluations_dir(w) == w / "evaluations"
    assert default_annotations_root(w) == w / "annotations"
    # Only the cache folder is created on asking, and only when asked to.
    assert not w.exists()
    assert cache_dir(w, create=False) == w / "cache"
    assert not (w / "cache").exists()
    assert cache_dir(w) == w / "cache"
    assert (w / "cache").is_dir()
    assert sorted(p.name for p in w.iterdir()) == ["cache"]


def test_verified_inputs_keys_each_file_by_its_workdir_path(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    folder = _sentences_snapshot(workdir, NEW)
    config = workdir / "config.yaml"
    config.write_text("a: 1\n")
    outside = tmp_path / "input.json"
    outside.write_text("{}")
    found = verified_inputs(workdir, [folder / "sentences.parquet", str(config), outside])
    assert found == {
        "snapshots/2024-06-01/sentences.parquet": file_sha256(folder / "sentences.parquet"),
        "config.yaml": file_sha256(config),
        # A file outside the workdir keeps its own path.
        outside.as_posix(): file_sha256(outside),
    }
    assert verified_inputs(workdir, []) == {}


def test_verified_inputs_tracks_the_bytes_of_an_input(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    config = workdir / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("a: 1\n")
    before = verified_inputs(workdir, [config])
    config.write_text("a: 2\n")
    after = verified_inputs(workdir, [config])
    assert before.keys() == after.keys() == {"config.yaml"}
    assert before != after


def test_a_missing_input_names_the_command_that_builds_it(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    path = snapshot_dir(workdir, NEW) / "sentences.parquet"
    with pytest.raises(MissingFileError) as caught:
        verified_inputs(workdir, [path])
    assert caught.value.path == path
    assert shown(caught.value) == (
        f"{path} is missing; build it with `wikidrift snapshot --date {NEW} --workdir {workdir}"
        " --force` (with the --source / --input / --config it was built from)"
    )
    plain = workdir / "config.yaml"
    with pytest.raises(MissingFileError) as caught:
        verified_inputs(workdir, [plain])
    assert shown(caught.value) == f"{plain} is missing"  # no stage writes it


def test_an_input_edited_after_its_stage_wrote_it_is_damaged(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    folder = _sentences_snapshot(workdir, NEW)
    path = folder / "sentences.parquet"
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(DamagedFileError) as caught:
        verified_inputs(workdir, [path])
    message = shown(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"{path} is not the file `wikidrift snapshot` wrote (its sha256 differs from "
        "snapshot.json): it was damaged or edited; rebuild it with `wikidrift snapshot --date "
        f"{NEW} --workdir {workdir} --force`"
    )


def test_an_input_its_marker_does_not_record_is_trusted(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    folder = _sentences_snapshot(workdir, NEW)
    extra = folder / "notes.txt"
    extra.write_text("not an output")
    assert verified_inputs(workdir, [extra]) == {
        "snapshots/2024-06-01/notes.txt": file_sha256(extra)
    }
    # A marker from before markers recorded outputs, or no marker at all, checks nothing.
    path = folder / "sentences.parquet"
    path.write_bytes(b"edited")
    write_json_atomic(folder / "snapshot.json", {"snapshot": NEW})
    assert verified_inputs(workdir, [path])["snapshots/2024-06-01/sentences.parquet"] == (
        file_sha256(path)
    )
    (folder / "snapshot.json").unlink()
    assert list(verified_inputs(workdir, [path])) == ["snapshots/2024-06-01/sentences.parquet"]


def test_output_fingerprints_and_outputs_intact(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "a.txt").write_text("a")
    recorded = output_fingerprints(tmp_path, ["b.txt", "a.txt"])
    assert list(recorded) == ["a.txt", "b.txt"]
    assert recorded["a.txt"] == file_sha256(tmp_path / "a.txt")
    assert outputs_intact(tmp_path, recorded)
    assert outputs_intact(tmp_path, {})  # a marker from before outputs were recorded
    (tmp_path / "b.txt").write_text("B")
    assert not outputs_intact(tmp_path, recorded)
    (tmp_path / "b.txt").write_text("b")
    assert outputs_intact(tmp_path, recorded)
    (tmp_path / "a.txt").unlink()
    assert not outputs_intact(tmp_path, recorded)


def test_done_before_needs_the_same_inputs_and_intact_outputs(tmp_path: Path) -> None:
    folder, summary = _labels(tmp_path)
    stored = own_marker(folder / "summary.json", LabelSummary)
    assert stored == summary
    assert done_before(stored, "digest-1", folder)
    assert not done_before(stored, "digest-2", folder)
    assert not done_before(None, "digest-1", folder)
    (folder / "report.txt").write_text("edited\n")
    assert not done_before(stored, "digest-1", folder)
    (folder / "report.txt").write_text("two pages\n")
    assert done_before(stored, "digest-1", folder)
    (folder / "sentence_labels.parquet").unlink()
    assert not done_before(stored, "digest-1", folder)


@pytest.mark.parametrize(
    "content",
    ["", "{not json", "[1, 2]", '"text"', '{"old": "2024-01-01"}', b"\xff\xfe{}"],
    ids=["empty", "not-json", "list", "string", "missing-keys", "not-utf8"],
)
def test_a_damaged_marker_is_no_marker_to_its_own_stage(
    tmp_path: Path, content: str | bytes
) -> None:
    folder, _ = _labels(tmp_path)
    path = folder / "summary.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert own_marker(path, LabelSummary) is None
    # Every other reader is told which command rebuilds the folder.
    with pytest.raises(DamagedFileError) as caught:
        read_marker(path, LabelSummary)
    message = shown(caught.value)
    assert message.startswith(f"{path} is damaged (")
    assert message.endswith(
        f"; rebuild it with `wikidrift label --old {OLD} --new {NEW} --workdir {tmp_path} --force`"
    )
    assert "\n" not in message


def test_a_marker_whose_outputs_are_no_object_is_damaged(tmp_path: Path) -> None:
    folder, _ = _labels(tmp_path)
    path = folder / "summary.json"
    data = json.loads(path.read_text())
    data["outputs"] = ["sentence_labels.parquet"]
    path.write_text(json.dumps(data))
    # the stage runs again instead of failing on a list where a mapping belongs
    assert own_marker(path, LabelSummary) is None
    with pytest.raises(DamagedFileError, match="'outputs' is not a JSON object"):
        read_marker(path, LabelSummary)


def test_own_marker_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert own_marker(tmp_path / "summary.json", LabelSummary) is None
    (tmp_path / "summary.json").mkdir()
    assert own_marker(tmp_path / "summary.json", LabelSummary) is None


def test_read_marker_leaves_out_keys_it_does_not_know(tmp_path: Path) -> None:
    _, summary = _labels(tmp_path)
    path = labels_dir(tmp_path, OLD, NEW) / "summary.json"
    data = json.loads(path.read_text())
    data["added_by_a_newer_wikidrift"] = {"x": 1}
    write_json_atomic(path, data)
    assert read_marker(path, LabelSummary) == summary
    assert read_label_summary(tmp_path, OLD, NEW) == summary


def test_only_complete_snapshots_are_listed(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    for day in ("2024-06-01", "2023-01-01", "2025-01-01"):
        _sentences_snapshot(workdir, day)
    # Unfinished: no snapshot.json yet.
    (snapshot_dir(workdir, "2024-01-01") / "_work").mkdir(parents=True)
    # A copy someone kept beside them, hidden, with its marker: not a snapshot.
    copy = workdir / "snapshots" / ".2024-06-01.bak"
    copy.mkdir()
    (copy / "snapshot.json").write_text("{}")
    assert list_snapshots(workdir) == ["2023-01-01", "2024-06-01", "2025-01-01"]
    assert is_complete(workdir, date(2024, 6, 1))
    assert not is_complete(workdir, "2024-01-01")
    assert not is_complete(workdir, "2026-01-01")


def test_ledger_previous_is_the_snapshot_the_ledger_came_from(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    _ledger_state(workdir, "2023-01-01", None)
    _ledger_state(workdir, "2024-06-01", "2023-01-01")
    _ledger_state(workdir, "2025-01-01", "2024-06-01")
    # A leftover temp folder and a folder whose update never finished are no ledger states.
    _ledger_state(workdir, ".2025-06-01.tmp", "2025-01-01")
    ledger_dir(workdir, "2025-06-01").mkdir()
    assert ledger_snapshots(workdir) == ["2023-01-01", "2024-06-01", "2025-01-01"]
    assert ledger_previous(workdir, "2023-01-01") is None
    assert ledger_previous(workdir, "2024-06-01") == "2023-01-01"
    assert ledger_previous(workdir, "2025-01-01") == "2024-06-01"
    assert read_ledger_summary(workdir, "2025-01-01").snapshot == "2025-01-01"
    with pytest.raises(WikidriftError, match="the ledger has not been brought to 2025-06-01"):
        ledger_previous(workdir, "2025-06-01")


def test_releases_are_listed_without_old_revisions_or_temp_folders(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    for day in ("2024-06-01", "2023-01-01", "2025-01-01"):
        _release(workdir, day)
    _release(workdir, "2024-06-01.r1")  # an earlier revision moved aside
    _release(workdir, ".2025-06-01.tmp")
    release_dir(workdir, "2025-06-01").mkdir()  # no manifest: never finished
    assert list_releases(workdir) == ["2023-01-01", "2024-06-01", "2025-01-01"]
    assert previous_release(workdir, "2023-01-01") is None
    assert previous_release(workdir, "2024-06-01") == "2023-01-01"
    assert previous_release(workdir, "2025-06-01") == "2025-01-01"


def test_an_empty_workdir_has_nothing_to_list(tmp_path: Path) -> None:
    assert list_snapshots(tmp_path) == []
    assert ledger_snapshots(tmp_path) == []
    assert list_releases(tmp_path) == []
    assert previous_release(tmp_path, NEW) is None
    assert read_questions(tmp_path, NEW) is None


def test_the_readers_of_a_stage_that_never_ran_say_so(tmp_path: Path) -> None:
    cases = [
        (lambda: read_snapshot_summary(tmp_path, NEW), "no complete snapshot 2024-06-01"),
        (lambda: read_snapshot_table(tmp_path, NEW, "sentences"), "run `wikidrift snapshot`"),
        (lambda: read_labels(tmp_path, OLD, NEW), "run `wikidrift label`"),
        (lambda: read_label_summary(tmp_path, OLD, NEW), "no labels 2024-01-01 -> 2024-06-01"),
        (lambda: read_generation_summary(tmp_path, NEW), "no generation run for 2024-06-01"),
        (lambda: read_ledger_summary(tmp_path, NEW), "has not been brought to 2024-06-01"),
        (lambda: read_manifest(tmp_path, NEW), "run `wikidrift release`"),
    ]
    for read, expected in cases:
        with pytest.raises(WikidriftError, match=expected):
            read()


def test_snapshot_tables_are_read_whole_or_for_some_pages(tmp_path: Path) -> None:
    _sentences_snapshot(tmp_path, NEW)
    assert read_snapshot_summary(tmp_path, NEW).sentences == 3
    table = read_snapshot_table(tmp_path, NEW, "sentences")
    assert table["text"].to_pylist() == ["One a.", "One b.", "Two a."]
    some = read_snapshot_table(tmp_path, NEW, "sentences", page_ids=[2], columns=["text"])
    assert some.to_pylist() == [{"text": "Two a."}]
    assert sentence_texts(tmp_path, NEW, [1, 1, 3]) == {(1, 0): "One a.", (1, 1): "One b."}
    with pytest.raises(ValueError, match="unknown snapshot table 'labels'"):
        read_snapshot_table(tmp_path, NEW, "labels")


def test_labels_are_read_for_some_pages(tmp_path: Path) -> None:
    _labels(tmp_path)
    assert read_labels(tmp_path, OLD, NEW)["label"].to_pylist() == ["unchanged", "new"]
    assert read_labels(tmp_path, OLD, NEW, page_ids=[2])["label"].to_pylist() == ["new"]


def test_generated_ledger_and_temporal_tables_are_read(tmp_path: Path) -> None:
    write_parquet_atomic(
        pa.Table.from_pylist([{"page_id": 3}], schema=GENERATED_TABLES["qa"]),
        generated_dir(tmp_path, NEW) / "qa.parquet",
        table_name="generated_qa",
        schema_version=1,
    )
    assert read_generated(tmp_path, NEW, "qa")["page_id"].to_pylist() == [3]
    with pytest.raises(ValueError, match="unknown generated table 'answers'"):
        read_generated(tmp_path, NEW, "answers")
    for name, schema, stored, row in [
        ("items", LEDGER_ITEMS_SCHEMA, "ledger_items", {"item_id": "i1"}),
        ("evidence", LEDGER_EVIDENCE_SCHEMA, "ledger_evidence", {"item_id": "i2"}),
    ]:
        write_parquet_atomic(
            pa.Table.from_pylist([row], schema=schema),
            ledger_dir(tmp_path, NEW) / f"{name}.parquet",
            table_name=stored,
            schema_version=1,
        )
    assert read_items(tmp_path, NEW)["item_id"].to_pylist() == ["i1"]
    assert read_evidence(tmp_path, NEW)["item_id"].to_pylist() == ["i2"]
    write_parquet_atomic(
        pa.Table.from_pylist([{"question_id": "t1"}], schema=TEMPORAL_QUESTIONS_SCHEMA),
        temporal_dir(tmp_path, NEW) / "questions.parquet",
        table_name="temporal_questions",
        schema_version=1,
    )
    questions = read_questions(tmp_path, NEW)
    assert questions is not None
    assert questions["question_id"].to_pylist() == ["t1"]


def test_a_release_is_checked_against_its_manifest(tmp_path: Path) -> None:
    folder = _release(tmp_path, NEW)
    assert check_release(tmp_path, NEW).release_id == "wikidrift-2024-06-01"
    qa = read_release_table(tmp_path, NEW, "qa")
    assert qa.to_pylist()[0]["question"] == "Q?"
    with pytest.raises(ValueError, match="unknown release table 'answers'"):
        read_release_table(tmp_path, NEW, "answers")
    path = folder / "qa.parquet"
    path.write_bytes(path.read_bytes()[:-1])
    expected = (
        "it was damaged or edited; rebuild it with "
        f"`wikidrift release --snapshot {NEW} --workdir {tmp_path} --force`"
    )
    with pytest.raises(DamagedFileError, match="differs from manifest.json") as caught:
        check_release(tmp_path, NEW)
    assert shown(caught.value).endswith(expected)
    with pytest.raises(DamagedFileError, match="differs from manifest.json"):
        read_release_table(tmp_path, NEW, "qa")
    path.unlink()
    with pytest.raises(MissingFileError) as caught:
        check_release(tmp_path, NEW)
    assert shown(caught.value) == (
        f"{path} is missing; build it with "
        f"`wikidrift release --snapshot {NEW} --workdir {tmp_path} --force`"
    )


def test_a_manifest_with_odd_file_entries_checks_what_it_can(tmp_path: Path) -> None:
    """A manifest entry without its sha256 records nothing to compare with (a good file is
    not called damaged), and a ``files`` that is no mapping is no record at all (no crash)."""
    folder = _release(tmp_path, NEW)
    path = folder / "qa.parquet"
    manifest = json.loads((folder / "manifest.json").read_text())
    for files in ({"qa.parquet": {"rows": 1}}, {"qa.parquet": "not an entry"}, ["qa.parquet"]):
        write_json_atomic(folder / "manifest.json", manifest | {"files": files})
        assert verified_inputs(tmp_path, [path]) == {
            f"releases/{NEW}/qa.parquet": file_sha256(path)
        }


def test_claim_workdir_records_the_layout_version_once(tmp_path: Path) -> None:
    stamp = tmp_path / VERSION_FILE
    claim_workdir(tmp_path)
    data = json.loads(stamp.read_text())
    assert data["workdir_version"] == WORKDIR_VERSION
    assert data["written_by"].startswith("wikidrift ")
    stamp.write_text(json.dumps({"workdir_version": WORKDIR_VERSION, "written_by": "earlier"}))
    claim_workdir(tmp_path)
    assert json.loads(stamp.read_text())["written_by"] == "earlier"
    check_workdir(tmp_path)
    # A workdir that does not exist yet is claimed by the first command that creates it.
    missing = tmp_path / "new"
    claim_workdir(missing)
    assert not missing.exists()


def test_a_workdir_of_a_newer_layout_is_refused(tmp_path: Path) -> None:
    stamp = tmp_path / VERSION_FILE
    later = WORKDIR_VERSION + 1
    stamp.write_text(json.dumps({"workdir_version": later, "written_by": "wikidrift 9.0"}))
    for check in (check_workdir, claim_workdir):
        with pytest.raises(NewerWorkdirError) as caught:
            check(tmp_path)
        message = str(caught.value)
        assert f"was laid out by a newer wikidrift (wikidrift 9.0, workdir version {later})" in (
            message
        )
        assert message.endswith("upgrade wikidrift, or use another workdir")


@pytest.mark.parametrize(
    "content",
    ["{", "[]", '{"written_by": "x"}', '{"workdir_version": "one"}'],
    ids=["cut-short", "list", "no-version", "not-a-number"],
)
def test_a_damaged_version_file_says_to_delete_it(tmp_path: Path, content: str) -> None:
    (tmp_path / VERSION_FILE).write_text(content)
    with pytest.raises(DamagedFileError, match="delete it and run the command again"):
        check_workdir(tmp_path)
