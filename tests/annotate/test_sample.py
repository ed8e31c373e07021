"""``annotate sample`` on real releases: strata, seeds, context from the old snapshot, refusals."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pipeline.annotate import TASKS_FILE, public_task, read_tasks
from pipeline.annotate.sample import _anchors, build_sample, sample_tasks
from pipeline.errors import WikidriftError
from pipeline.layout import read_manifest, read_release_table, read_snapshot_table
from tests.annotate import FIRST_RELEASE, RELEASE
from tests.conftest import copy_workdir
from wikidrift.cli import main


@pytest.fixture(scope="module")
def release_labels(released_workdir: Path) -> list[dict]:
    """The sentence labels of RELEASE."""
    return read_release_table(released_workdir, RELEASE, "sentence_labels").to_pylist()


def _available(labels: list[dict], label: str) -> int:
    return sum(1 for r in labels if r["label"] == label and r["new_idx"] is not None)


def test_stratified_counts(released_workdir: Path, release_labels: list[dict]) -> None:
    # the release has 3 changed sentences (real updates only), all of them drawn
    tasks, available, taken, old = build_sample(released_workdir, RELEASE, per_label=3, seed=3)
    assert old == read_manifest(released_workdir, RELEASE).previous_release == FIRST_RELEASE
    assert available == {
        "new": _available(release_labels, "new"),
        "changed": _available(release_labels, "changed"),
    }
    assert available["new"] > 3 and available["changed"] == 3
    assert Counter(t["label"] for t in tasks) == {"new": 3, "changed": 3} == taken
    assert {t["kind"] for t in tasks} == {"sentence"}
    assert len({t["task_id"] for t in tasks}) == 6
    # Shuffled together: the first three are not all one stratum.
    assert len({t["label"] for t in tasks[:3]}) == 2


def test_per_label_larger_than_the_release(
    released_workdir: Path, release_labels: list[dict]
) -> None:
    tasks, available, taken, _ = build_sample(released_workdir, RELEASE, per_label=10_000)
    assert taken == available
    changed = {(r["page_id"], r["new_idx"]) for r in release_labels if r["label"] == "changed"}
    assert {(t["page_id"], t["new_idx"]) for t in tasks if t["label"] == "changed"} == changed


def test_qa_items(released_workdir: Path) -> None:
    qa = read_release_table(released_workdir, RELEASE, "qa").to_pylist()
    tasks, available, taken, _ = build_sample(
        released_workdir, RELEASE, per_label=3, seed=1, include_qa=6
    )
    # half of the QA items changed ones, as far as the release has them; new ones fill up
    assert available["qa_new"] == sum(q["type"] == "new" for q in qa)
    assert available["qa_changed"] == sum(q["type"] == "changed" for q in qa) >= 1
    n_changed = min(3, available["qa_changed"])
    assert taken == {"new": 3, "changed": 3, "qa_new": 6 - n_changed, "qa_changed": n_changed}
    by_id = {q["item_id"]: q for q in qa}
    qa_tasks = [t for t in tasks if t["kind"] == "qa"]
    assert len(qa_tasks) == 6
    for t in qa_tasks:
        item = by_id[t["qa"]["item_id"]]
        assert t["label"] == item["type"] and t["sentence"] == item["evidence_text"]
        assert t["qa"]["question"] == item["question"] and t["qa"]["answer"] == item["answer"]
        assert "previous_answer" not in public_task(t)["qa"]
    # Asking for QA items does not change which sentences are drawn.
    plain, *_ = build_sample(released_workdir, RELEASE, per_label=3, seed=1)
    assert sorted(t["task_id"] for t in plain) == sorted(
        t["task_id"] for t in tasks if t["kind"] == "sentence"
    )


def test_seed_reproducible(released_workdir: Path) -> None:
    a, *_ = build_sample(released_workdir, RELEASE, per_label=8, seed=11)
    b, *_ = build_sample(released_workdir, RELEASE, per_label=8, seed=11)
    c, *_ = build_sample(released_workdir, RELEASE, per_label=8, seed=12)
    assert a == b
    assert {t["task_id"] for t in a} != {t["task_id"] for t in c}
    # Ids are a function of the sentence, not of the draw.
    key = {(t["page_id"], t["new_idx"]): t["task_id"] for t in a}
    shared = [t for t in c if (t["page_id"], t["new_idx"]) in key]
    assert shared  # two draws of one release overlap
    for t in shared:
        assert key[(t["page_id"], t["new_idx"])] == t["task_id"]


def test_context_really_from_the_old_snapshot(
    released_workdir: Path, release_labels: list[dict]
) -> None:
    tasks, *_ = build_sample(released_workdir, RELEASE, per_label=15, seed=5)
    pages = sorted({t["page_id"] for t in tasks})
    cols = ["page_id", "sent_idx", "section", "text"]
    old = {
        (s["page_id"], s["sent_idx"]): s
        for s in read_snapshot_table(
            released_workdir, FIRST_RELEASE, "sentences", page_ids=pages, columns=cols
        ).to_pylist()
    }
    new = {
        (s["page_id"], s["sent_idx"]): s
        for s in read_snapshot_table(
            released_workdir, RELEASE, "sentences", page_ids=pages, columns=cols
        ).to_pylist()
    }
    labels = {(r["page_id"], r["new_idx"]): r for r in release_labels}
    for t in tasks:
        pid = t["page_id"]
        assert t["old_snapshot"] == FIRST_RELEASE and t["release"] == RELEASE
        assert t["sentence"] == new[(pid, t["new_idx"])]["text"]
        assert t["section"] == new[(pid, t["new_idx"])]["section"]
        assert labels[(pid, t["new_idx"])]["label"] == t["label"]
        assert t["old_context"], f"{t['task_id']}: no old context"
        for s in t["old_context"]:
            assert old[(pid, s["sent_idx"])]["text"] == s["text"]
            assert old[(pid, s["sent_idx"])]["section"] == s["section"]
        if t["old_section"] is not None:
            assert t["old_section"]["name"] == t["section"]
            for s in t["old_section"]["sentences"]:
                assert old[(pid, s["sent_idx"])]["section"] == t["section"]
                assert old[(pid, s["sent_idx"])]["text"] == s["text"]
        else:
            assert all(s["section"] != t["section"] for k, s in old.items() if k[0] == pid)
        for s in t["new_context"]["before"] + t["new_context"]["after"]:
            assert new[(pid, s["sent_idx"])]["text"] == s["text"]
        closest = t["closest_old"]
        if closest is None:  # a new sentence sharing no content word with the old article
            assert t["label"] == "new"
            continue
        assert old[(pid, closest["sent_idx"])]["text"] == closest["text"]
        if t["label"] == "changed":
            old_idx = labels[(pid, t["new_idx"])]["old_idx"]
            assert t["replaces"]["sent_idx"] == old_idx
            assert t["replaces"]["text"] == old[(pid, old_idx[0])]["text"]
            assert closest["sent_idx"] == old_idx[0] and closest["source"] == "aligned"
            # The replaced sentence sits in the middle of the old context.
            assert old_idx[0] in {s["sent_idx"] for s in t["old_context"]}
        else:
            assert "replaces" not in t and closest["source"] == "lexical"


def test_public_view_is_blind(released_workdir: Path) -> None:
    tasks, *_ = build_sample(released_workdir, RELEASE, per_label=3, seed=2)
    for t in tasks:
        view = public_task(t)
        for hidden in ("label", "rule", "decided_by", "similarity", "replaces"):
            assert hidden not in view
        assert "source" not in view["closest_old"]
        assert view["sentence"] == t["sentence"] and view["old_context"] == t["old_context"]


def test_anchors_bracket_the_insertion_point() -> None:
    # new 0 -> old 0, new 1 is new, new 2 -> old 3 (old 1-2 deleted), new 3 is new (last)
    aligned = {0: [0], 1: [], 2: [3], 3: []}
    assert _anchors(aligned, 1, 4) == [0, 3]
    assert _anchors(aligned, 3, 4) == [3]
    assert _anchors({0: [], 1: [5]}, 0, 2) == [5]
    assert _anchors({0: []}, 0, 1) == []


def test_written_file_and_unchanged_resample(released_workdir: Path, tmp_path: Path) -> None:
    root = tmp_path / "ann"
    summary = sample_tasks(released_workdir, RELEASE, per_label=5, seed=9, annotations_root=root)
    path = root / RELEASE / TASKS_FILE
    assert summary.path == str(path) and not summary.unchanged
    tasks = read_tasks(root / RELEASE)
    assert len(tasks) == 8  # 5 new, and the release's 3 changed
    meta = json.loads((root / RELEASE / "sample.json").read_text())
    assert meta["seed"] == 9 and meta["n_tasks"] == 8
    again = sample_tasks(released_workdir, RELEASE, per_label=5, seed=9, annotations_root=root)
    assert again.unchanged
    assert not list(released_workdir.glob("annotations"))  # the shared workdir is untouched


def test_refuses_to_replace_judged_tasks(released_workdir: Path, tmp_path: Path) -> None:
    root = tmp_path / "ann"
    sample_tasks(released_workdir, RELEASE, per_label=5, seed=1, annotations_root=root)
    # Unjudged tasks may be replaced freely.
    sample_tasks(released_workdir, RELEASE, per_label=5, seed=2, annotations_root=root)
    first = read_tasks(root / RELEASE)[0]
    line = {"task_id": first["task_id"], "label": "supported", "annotator": "alice"}
    (root / RELEASE / "alice.jsonl").write_text(json.dumps(line) + "\n")
    before = (root / RELEASE / TASKS_FILE).read_text()
    with pytest.raises(WikidriftError, match=r"1 judgment\(s\).*alice.*--force"):
        sample_tasks(released_workdir, RELEASE, per_label=5, seed=3, annotations_root=root)
    assert (root / RELEASE / TASKS_FILE).read_text() == before
    # The same draw again is not a replacement: no refusal.
    assert sample_tasks(
        released_workdir, RELEASE, per_label=5, seed=2, annotations_root=root
    ).unchanged
    forced = sample_tasks(
        released_workdir, RELEASE, per_label=5, seed=3, annotations_root=root, force=True
    )
    assert forced.replaced_judged == 1
    assert (root / RELEASE / TASKS_FILE).read_text() != before
    assert (root / RELEASE / "alice.jsonl").exists()  # judgments are never deleted


def test_first_release_has_nothing_to_annotate(released_workdir: Path, tmp_path: Path) -> None:
    with pytest.raises(WikidriftError, match="first release") as err:
        sample_tasks(released_workdir, FIRST_RELEASE, annotations_root=tmp_path)
    message = str(err.value)
    assert "nothing to validate" in message and f"--release {RELEASE}" in message
    assert not (tmp_path / FIRST_RELEASE).exists()


def test_cli_sample(
    released_workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    args = ["annotate", "sample", "--release", RELEASE, "--workdir", str(workdir)]
    assert main([*args, "--per-label", "3", "--seed", "7", "--include-qa", "2"]) == 0
    out = capsys.readouterr().out
    assert "new=3" in out and "changed=3" in out and "qa_new=1" in out
    tasks = read_tasks(workdir / "annotations" / RELEASE)  # the default root
    assert len(tasks) == 8
    bad = ["annotate", "sample", "--release", FIRST_RELEASE, "--workdir", str(workdir)]
    assert main(bad) == 2
    assert "first release" in capsys.readouterr().err
