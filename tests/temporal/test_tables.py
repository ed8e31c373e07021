"""The temporal tables of real releases (four wikisnap articles over three snapshots, items
and question phrasings from the scripted LLM): what they hold, and what verify catches."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.export_hf import export_hf, split_name
from pipeline.layout import (
    read_items,
    read_labels,
    read_manifest,
    read_release_table,
    read_snapshot_table,
    release_dir,
)
from pipeline.release_diff import release_diff
from pipeline.release_verify import verify_release
from pipeline.schemas import RELEASE_SCHEMA_VERSION, RELEASE_TABLES
from pipeline.storage import write_parquet_atomic
from pipeline.temporal.tables import parse_sentence_id
from tests.conftest import STAGE_DATES, copy_workdir, reseal_release

A, B, C = STAGE_DATES


def _rows(workdir: Path, snapshot: str, name: str) -> list[dict]:
    return read_release_table(workdir, snapshot, name).to_pylist()


def _rewrite(workdir: Path, snapshot: str, name: str, rows: list[dict]) -> None:
    """Replace a release table and fix its checksum, as a careful forger would."""
    out = release_dir(workdir, snapshot)
    path = out / f"{name}.parquet"
    table = pa.Table.from_pylist(rows, schema=RELEASE_TABLES[name].schema)
    write_parquet_atomic(
        table, path, table_name=f"release_{name}", schema_version=RELEASE_SCHEMA_VERSION
    )
    reseal_release(workdir, snapshot)


def test_questions_of_every_category_with_answers_from_the_quadruples(
    released_workdir: Path,
) -> None:
    qa = _rows(released_workdir, C, "temporal_qa")
    quads = {q["item_id"]: q for q in _rows(released_workdir, C, "quadruples")}
    counts = read_manifest(released_workdir, C).counts["temporal_qa"]
    assert counts["C1"] > 0 and counts["C2"] > 0 and counts["C3"] > 0, counts
    for q in qa:
        facts = [quads[i] for i in q["quadruple_ids"]]
        assert q["evidence_text"] == [f["evidence_text"] for f in facts]
        assert q["question"].endswith("?")
        if q["category"] == "C1":
            assert q["answer"] == [facts[0]["object"]] and q["answer_mode"] == "any"
            assert q["as_of"] == (facts[0]["timestamp"] or facts[0]["observed_at"][:7])
        if q["category"] == "C2":
            assert len(q["answer"]) >= 2 and q["answer_mode"] == "all"
            assert {f["object"] for f in facts} >= set(q["answer"])
            start, end = q["as_of"].split("/")
            assert start < end and q["valid_from"] == start
        if q["category"] == "C3":
            (first, second) = facts
            assert first["subject"] != second["subject"]
            assert q["answer"][0] in (first["object"], second["subject"], second["object"])
    # a question first made at B is "unchanged" at C
    old = {q["question_id"] for q in _rows(released_workdir, B, "temporal_qa")}
    assert any(q["type"] == "unchanged" for q in qa if q["question_id"] in old)
    assert all(q["type"] == "new" for q in qa if q["question_id"] not in old)


def test_timelines_give_one_answer_per_interval(released_workdir: Path) -> None:
    rows = _rows(released_workdir, C, "timelines")
    items = {it["item_id"]: it for it in read_items(released_workdir, C).to_pylist()}
    by_question: dict[str, list[dict]] = {}
    for r in rows:
        by_question.setdefault(r["question_id"], []).append(r)
    sources = {r["source"] for r in rows}
    # fact chains come only from supersession by an update; this corpus's updates change
    # values no scripted quadruple holds, so its timelines are the QA chains
    superseded = [q for q in _rows(released_workdir, C, "quadruples") if q["superseded_by"]]
    assert sources == {"qa_chain"} | ({"fact_chain"} if superseded else set()), sources
    for qid, intervals in by_question.items():
        intervals.sort(key=lambda r: r["interval_idx"])
        for before, after in zip(intervals, intervals[1:], strict=False):
            assert before["interval_end"] == after["interval_start"]  # contiguous
            assert before["answer"] != after["answer"]
        if intervals[0]["source"] == "qa_chain":
            item = items[qid]
            assert [r["answer"] for r in intervals] == [item["previous_answer"], item["answer"]]
            assert intervals[1]["interval_start"] == item["created_snapshot"]
            # the earlier answer holds from the first snapshot whose sentence said it, back
            # through the labels that kept that sentence unchanged
            start = item["created_snapshot"]
            _, _, (idx,) = parse_sentence_id(intervals[0]["evidence_id"])
            idx_at = [idx]
            for old, new in reversed(list(zip(STAGE_DATES, STAGE_DATES[1:], strict=False))):
                if new >= item["created_snapshot"]:
                    continue
                labels = read_labels(released_workdir, old, new).to_pylist()
                row = next(
                    (r for r in labels if r["page_id"] == item["page_id"]
                     and [r["new_idx"]] == idx_at),
                    None,
                )  # fmt: skip
                if row is None or row["label"] != "unchanged":
                    break
                start, idx_at = old, row["old_idx"]
            start = min(start, STAGE_DATES[STAGE_DATES.index(item["created_snapshot"]) - 1])
            assert intervals[0]["interval_start"] == start


def test_relations_link_existing_endpoints(released_workdir: Path) -> None:
    rows = _rows(released_workdir, C, "relations")
    kinds = {(r["type"], r["rule"].split(":")[0]) for r in rows}
    assert ("updates", "changed") in kinds
    assert ("supports", "reworded") in kinds or ("supports", "same_fact") in kinds
    superseded = [q for q in _rows(released_workdir, C, "quadruples") if q["superseded_by"]]
    assert (("updates", "supersession") in kinds) == bool(superseded)
    # an `updates` edge between sentences exists only where the newer one is labeled changed
    changed = {
        (snap, r["page_id"], r["new_idx"])
        for snap in (B, C)
        for r in _rows(released_workdir, snap, "sentence_labels")
        if r["label"] == "changed"
    }
    for r in rows:
        if r["type"] == "updates" and r["source_kind"] == "sentence":
            snap, page, idx = parse_sentence_id(r["source_id"])
            assert (snap, page, idx[0]) in changed, r
    quads = {q["item_id"] for q in _rows(released_workdir, C, "quadruples")}
    for r in rows[:200]:
        assert r["source_snapshot"] >= r["target_snapshot"]  # newer -> older
        for end in ("source", "target"):
            if r[f"{end}_kind"] == "quadruple":
                assert r[f"{end}_id"].removeprefix("q:") in quads
                continue
            snap, page, idx = parse_sentence_id(r[f"{end}_id"])
            s = read_snapshot_table(
                released_workdir, snap, "sentences", page_ids=[page]
            ).to_pylist()
            text = {x["sent_idx"]: x["text"] for x in s}
            assert " ".join(text[i] for i in idx) == r[f"{end}_text"]
    # sentence relations accumulate (quadruple ones leave with their facts)
    earlier = _rows(released_workdir, B, "relations")
    assert {r["relation_id"] for r in earlier if r["source_kind"] == "sentence"} <= {
        r["relation_id"] for r in rows
    }


def test_card_counts_and_diff_cover_the_temporal_tables(released_workdir: Path) -> None:
    card = (release_dir(released_workdir, C) / "README.md").read_text()
    assert "## Temporal layer" in card and "![timelines](timeline.png)" in card
    assert f"| {B} |" in card.split("## Temporal layer")[1]
    diff = release_diff(released_workdir, B, C)
    m_b, m_c = read_manifest(released_workdir, B), read_manifest(released_workdir, C)
    t = diff["temporal_qa"]
    assert t["kept"] + t["retired"] == m_b.counts["temporal_qa"]["total"]
    assert t["kept"] + t["added"] == m_c.counts["temporal_qa"]["total"]
    assert sum(t["retired_by_reason"].values()) == t["retired"]
    r = diff["relations"]
    assert r["kept"] + r["added"] == m_c.counts["relations"]["total"]
    assert r["kept"] + r["retired"] == m_b.counts["relations"]["total"]


@pytest.mark.usefixtures("exports_share_the_session_embedder")
def test_hf_export_has_the_temporal_configs(released_workdir: Path, tmp_path: Path) -> None:
    import datasets

    out = export_hf(released_workdir, C, tmp_path / "hf")
    # a cache of its own: the shared one served an earlier export of a same-named folder
    cache = str(tmp_path / "datasets-cache")
    for name in ("temporal_qa", "timelines", "relations"):
        ds = datasets.load_dataset(str(out), name, split=split_name(C), cache_dir=cache)
        assert ds.num_rows == read_manifest(released_workdir, C).files[f"{name}.parquet"]["rows"]
    qa = datasets.load_dataset(str(out), "temporal_qa", split=split_name(C), cache_dir=cache)
    assert isinstance(qa[0]["answer"], list)


def test_verify_catches_a_wrong_c2_answer(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    rows = _rows(workdir, C, "temporal_qa")
    c2 = next(r for r in rows if r["category"] == "C2")
    c2["answer"] = c2["answer"][:-1]  # one object of the interval left out
    _rewrite(workdir, C, "temporal_qa", rows)
    problems = verify_release(workdir, C)
    assert any(c2["question_id"] in p and "C2 answer" in p for p in problems), problems


def test_verify_catches_a_question_on_a_missing_quadruple(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    rows = _rows(workdir, C, "temporal_qa")
    rows[0]["quadruple_ids"] = ["0000000000000000"]
    _rewrite(workdir, C, "temporal_qa", rows)
    problems = verify_release(workdir, C)
    assert any("supporting quadruple(s) not in the release" in p for p in problems), problems


def test_verify_catches_a_relation_endpoint_that_does_not_exist(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    rows = _rows(workdir, C, "relations")
    sentence = next(r for r in rows if r["target_kind"] == "sentence")
    snap, page, idx = parse_sentence_id(sentence["target_id"])
    sentence["target_id"] = f"s:{snap}:{page}:{idx[0] + 100000}"
    # (a forged quadruple endpoint: this corpus's releases hold no quadruple relations)
    quad = next(r for r in rows if r is not sentence)
    quad["source_kind"], quad["source_id"] = "quadruple", "q:ffffffffffffffff"
    _rewrite(workdir, C, "relations", rows)
    problems = verify_release(workdir, C)
    assert any("is not a sentence of snapshot" in p for p in problems), problems
    assert any("is not a quadruple of the release" in p for p in problems), problems


def test_verify_catches_an_edited_timeline_answer(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    rows = _rows(workdir, C, "timelines")
    row = next(r for r in rows if r["source"] == "qa_chain")
    row["answer"] = "something else"
    _rewrite(workdir, C, "timelines", rows)
    problems = verify_release(workdir, C)
    assert any("!= ledger" in p for p in problems), problems
