"""Paragraph selection, K-Means picks, new-sentence groups, changed pairs, on real articles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.cluster import KMeans

from pipeline.config import GenerationConfig
from pipeline.generate.selection import (
    Article,
    changed_pairs,
    dialogue_paragraphs,
    group_new_sentences,
    informative_paragraphs,
    is_elaboration,
    is_informative,
    is_statement,
    select_paragraphs,
    source_context,
)
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.layout import read_snapshot_table
from pipeline.models.embedder import Embedder
from tests.generate.conftest import KARPATHY, NEW, OLD

pytestmark = pytest.mark.slow  # builds and labels a real workdir (spaCy, MiniLM)

CFG = GenerationConfig()


@pytest.fixture(scope="module")
def new_articles(gen_snapshots_dir: Path) -> list[Article]:
    return load_articles(gen_snapshots_dir, NEW)


@pytest.fixture(scope="module")
def labeled(gen_source_workdir: Path) -> tuple[list[Article], list[Article]]:
    initial, updated, missing = attach_labels(
        gen_source_workdir, OLD, NEW, load_articles(gen_source_workdir, NEW)
    )
    assert missing == 0
    return initial, updated


def _synthetic(labels: list[str], paras: list[int]) -> Article:
    n = len(labels)
    return Article(
        page_id=7,
        title="T",
        snapshot=NEW,
        texts=[f"This is test sentence number {i}." for i in range(n)],
        para_of=paras,
        section_of=[""] * n,
        labels=dict(enumerate(labels)),
        initial=False,
    )


def test_paragraphs_rebuild_the_sentence_table(
    new_articles: list[Article], gen_snapshots_dir: Path
) -> None:
    rows = read_snapshot_table(gen_snapshots_dir, NEW, "sentences").to_pylist()
    assert new_articles
    for art in new_articles:
        mine = [r for r in rows if r["page_id"] == art.page_id]
        paragraphs = art.paragraphs()
        assert mine and paragraphs
        assert [i for p in paragraphs for i in p.sent_idx] == list(range(len(mine)))
        for p in paragraphs:
            assert {mine[i]["para_idx"] for i in p.sent_idx} == {p.para_idx}
            assert p.text == " ".join(mine[i]["text"] for i in p.sent_idx)


def test_informative_criteria_on_real_paragraphs(new_articles: list[Article]) -> None:
    passed = failed = 0
    for art in new_articles:
        for p in art.paragraphs():
            ok = len(p.sent_idx) < 5 and 300 <= len(p.text) <= 600
            assert is_informative(p, CFG) == ok
            passed += ok
            failed += not ok
    assert passed >= 10 and failed >= 10  # the real data exercises both sides
    narrow = GenerationConfig(paragraph_min_chars=500, paragraph_max_sentences=2)
    for art in new_articles:
        for p in informative_paragraphs(art, narrow):
            assert len(p.sent_idx) <= 2 and len(p.text) >= 500


def test_kmeans_selection_is_one_per_cluster_and_deterministic(
    new_articles: list[Article], minilm: Embedder
) -> None:
    picks = select_paragraphs(new_articles, minilm, CFG)
    again = select_paragraphs(new_articles, minilm, CFG)
    assert picks == again
    clustered = 0
    for art in new_articles:
        candidates = informative_paragraphs(art, CFG)
        chosen = picks[art.page_id]
        assert all(is_informative(p, CFG) for p in chosen)
        assert [p.para_idx for p in chosen] == sorted({p.para_idx for p in chosen})
        if len(candidates) <= CFG.paragraphs_per_article:
            assert chosen == candidates
            continue
        clustered += 1
        assert len(chosen) == CFG.paragraphs_per_article
        vectors = minilm.embed([p.text for p in candidates])
        labels = KMeans(n_clusters=4, n_init=10, random_state=CFG.seed).fit_predict(
            np.asarray(vectors, dtype=np.float64)
        )
        cluster_of = {p.para_idx: int(c) for p, c in zip(candidates, labels, strict=True)}
        assert len({cluster_of[p.para_idx] for p in chosen}) == 4  # one from each cluster
    assert clustered >= 2, "the test articles should have more than 4 candidate paragraphs"
    other_seed = select_paragraphs(new_articles, minilm, GenerationConfig(seed=1))
    assert all(len(other_seed[a.page_id]) == len(picks[a.page_id]) for a in new_articles)


def test_new_groups_split_at_six_and_at_paragraph_breaks() -> None:
    art = _synthetic(
        ["new"] * 13 + ["unchanged"] + ["new"] * 3 + ["new"] * 2 + ["changed", "new"],
        [0] * 13 + [1] + [1] * 3 + [2] * 2 + [2, 2],
    )
    groups = group_new_sentences(art, 6)
    assert [g.sent_idx for g in groups] == [
        tuple(range(0, 6)),
        tuple(range(6, 12)),
        (12,),
        (14, 15, 16),
        (17, 18),
        (20,),
    ]
    assert [g.para_idx for g in groups] == [0, 0, 0, 1, 2, 2]
    assert groups[3].texts == tuple(f"This is test sentence number {i}." for i in (14, 15, 16))
    assert [len(g.sent_idx) for g in group_new_sentences(art, 4)][:4] == [4, 4, 4, 1]


def test_groups_and_pairs_on_real_labels(
    labeled: tuple[list[Article], list[Article]], gen_source_workdir: Path
) -> None:
    initial, updated = labeled
    assert [a.page_id for a in initial] == [KARPATHY]
    old_rows = read_snapshot_table(gen_source_workdir, OLD, "sentences").to_pylist()
    old_text = {(r["page_id"], r["sent_idx"]): r["text"] for r in old_rows}
    n_groups = n_pairs = 0
    for art in updated:
        for g in group_new_sentences(art, 6):
            n_groups += 1
            assert 1 <= len(g.sent_idx) <= 6
            assert all(art.labels[i] == "new" for i in g.sent_idx)
            assert list(g.sent_idx) == list(range(g.sent_idx[0], g.sent_idx[-1] + 1))
            assert {art.para_of[i] for i in g.sent_idx} == {g.para_idx}
        covered = [i for g in group_new_sentences(art, 6) for i in g.sent_idx]
        assert covered == [
            i
            for i, lab in sorted(art.labels.items())
            if lab == "new" and is_statement(art.texts[i])
        ]
        for pair in changed_pairs(art):
            n_pairs += 1
            assert art.labels[pair.new_idx] == "changed"
            assert pair.new_text == art.texts[pair.new_idx]
            assert pair.old_text == old_text[(art.page_id, pair.old_idx)]
            assert pair.old_text != pair.new_text
    assert n_groups >= 5 and n_pairs >= 3  # the updates of Lisa Su, Tesla Model Y, ...


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("Mercedes finished 2023 second in the Constructors' Championship.", True),
        ("The following drivers won the Formula One Drivers' Championship for Mercedes:", False),
        ("* Season still in progress.", False),
        ("Notes and references.", False),
        ("Economic impact on Danish society", False),
    ],
)
def test_only_statements_become_items(text: str, statement: bool) -> None:
    assert is_statement(text) is statement
    art = _synthetic(["new", "new"], [0, 0])
    art.texts[1] = text
    covered = [i for g in group_new_sentences(art, 6) for i in g.sent_idx]
    assert covered == ([0, 1] if statement else [0])


def test_dialogue_paragraphs_need_a_change_and_decided_labels(
    labeled: tuple[list[Article], list[Article]],
) -> None:
    _, updated = labeled
    found = 0
    for art in updated:
        chosen = dialogue_paragraphs(art, CFG)
        found += len(chosen)
        for p in informative_paragraphs(art, CFG):
            labels = {art.labels.get(i, "unlabeled") for i in p.sent_idx}
            want = bool(labels & {"new", "changed"}) and "unlabeled" not in labels
            assert (p in chosen) == want
    assert found >= 3


def test_source_context_surrounds_the_group(labeled: tuple[list[Article], list[Article]]) -> None:
    _, updated = labeled
    for art in updated:
        for g in group_new_sentences(art, 6):
            context = source_context(art, g.para_idx, g.sent_idx, 2000)
            assert len(context) <= 2000 or len(g.texts) == 1
            assert g.texts[0] in context or len(" ".join(g.texts)) > 2000
            own = next(p for p in art.paragraphs() if p.para_idx == g.para_idx)
            if not set(own.sent_idx) <= set(g.sent_idx) and len(own.text) <= 2000:
                assert context == own.text  # the paragraph around the group, nothing more
    assert source_context(updated[0], updated[0].para_of[0], (0,), 0) == ""


@pytest.mark.parametrize(
    ("old", "new", "elaboration"),
    [
        (
            "Arvind Krishna (born 1962) is an executive.",
            "Arvind Krishna (born November 23, 1962) is an executive.",
            True,
        ),
        (
            "Aston Martin retain Fernando Alonso.",
            "Aston Martin retain Fernando Alonso and Lance Stroll.",
            True,
        ),
        ("Karpathy received a PhD in 2016.", "Karpathy received a PhD in 2015.", False),
        (
            "The notch was introduced from the iPhone 13.",
            "The notch was introduced in the iPhone X.",
            False,
        ),
        (
            "In addition, Aston Martin will build a gearbox.",
            "In addition, the Silverstone-based team will build a gearbox.",
            False,
        ),
    ],
)
def test_elaborations_are_not_changed_pairs(old: str, new: str, elaboration: bool) -> None:
    assert is_elaboration(old, new) is elaboration
    art = _synthetic(["changed"], [0])
    art.texts[0] = new
    art.old_of[0] = (0, old)
    assert len(changed_pairs(art)) == (0 if elaboration else 1)
