"""``annotate report``: majority vote, ties, GrowOVER's rule, Fleiss' kappa, the Markdown."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from pipeline.annotate.report import (
    NO_MAJORITY,
    build_report,
    fleiss_kappa,
    label_is_correct,
    label_is_correct_strict,
    majority_vote,
    render_markdown,
)
from wikidrift.cli import main

S, N, U = "supported", "not_supported", "uncertain"


@pytest.mark.parametrize(
    ("votes", "verdict"),
    [
        ([S, S, N], S),
        ([N, N, N], N),
        ([U, U, S], U),
        ([S, N, U], NO_MAJORITY),  # three raters, three answers
        ([S, N], NO_MAJORITY),  # a two-rater tie
        ([S, S, N, N], NO_MAJORITY),
        ([N, N, N, S], N),
        ([S], S),
        ([], NO_MAJORITY),
    ],
)
def test_majority_vote(votes: list[str], verdict: str) -> None:
    assert majority_vote(votes) == verdict


@pytest.mark.parametrize(
    ("label", "verdict", "correct", "strict"),
    [
        # GrowOVER Appendix D: new is wrong only when "supported" ...
        ("new", S, False, False),
        ("new", N, True, True),
        ("new", U, True, False),
        ("new", NO_MAJORITY, True, False),
        # ... changed is right only when "not supported".
        ("changed", N, True, True),
        ("changed", S, False, False),
        ("changed", U, False, False),
        ("changed", NO_MAJORITY, False, False),
    ],
)
def test_correctness_rule(label: str, verdict: str, correct: bool, strict: bool) -> None:
    assert label_is_correct(label, verdict) is correct
    assert label_is_correct_strict(label, verdict) is strict


def test_correctness_rule_rejects_other_labels() -> None:
    with pytest.raises(ValueError):
        label_is_correct("unchanged", S)


# The worked example of the Wikipedia article "Fleiss' kappa" (14 raters, 10 subjects, 5
# categories), also table0 of statsmodels' inter-rater tests. The article gives P-bar = 0.378,
# P_e = 0.213 and kappa = 0.210. (It is often called "the Fleiss 1971 example", but Fleiss'
# own 1971 data are 30 patients x 6 psychiatrists, kappa = 0.430.)
WIKIPEDIA_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_textbook_example() -> None:
    kappa = fleiss_kappa(WIKIPEDIA_TABLE)
    assert kappa is not None
    assert round(kappa, 3) == 0.210
    assert kappa == pytest.approx(0.20993, abs=5e-5)
    # The same numbers from the article's intermediate values.
    assert kappa == pytest.approx((0.378 - 0.213) / (1 - 0.213), abs=2e-3)
    assert fleiss_kappa(list(reversed(WIKIPEDIA_TABLE))) == pytest.approx(kappa)


def test_fleiss_kappa_edge_cases() -> None:
    assert fleiss_kappa([[3, 0, 0], [0, 3, 0], [0, 0, 3]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0, 0], [3, 0, 0]]) is None  # one category only: undefined
    assert fleiss_kappa([]) is None
    assert fleiss_kappa([[1, 0, 0], [0, 1, 0]]) is None  # nobody rated twice
    # Systematic disagreement is below chance.
    kappa = fleiss_kappa([[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    assert kappa is not None and kappa < 0
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 2], [1, 2, 3]])


def test_fleiss_kappa_unequal_raters_by_hand() -> None:
    rows = [[2, 1, 0], [0, 3, 0], [0, 0, 1], [1, 1, 0]]
    # Observed agreement over rows with >= 2 raters: (2/6 + 6/6 + 0/2) / 3 = 4/9.
    observed = (Fraction(2, 6) + Fraction(6, 6) + Fraction(0, 2)) / 3
    # Category shares: each row's proportions averaged over the 4 rated rows.
    shares = [
        (Fraction(2, 3) + 0 + 0 + Fraction(1, 2)) / 4,
        (Fraction(1, 3) + 1 + 0 + Fraction(1, 2)) / 4,
        (0 + 0 + Fraction(1, 1) + 0) / 4,
    ]
    chance = sum(p * p for p in shares)
    expected = (observed - chance) / (1 - chance)
    assert expected == Fraction(5, 37)
    assert fleiss_kappa(rows) == pytest.approx(float(expected))
    # Equal rater counts reduce to the classic formula (pooled category shares).
    equal = [[2, 1, 0], [0, 3, 0], [1, 1, 1], [0, 0, 3]]
    pooled = [sum(r[j] for r in equal) / 12 for j in range(3)]
    p_bar = sum(sum(c * (c - 1) for c in r) / 6 for r in equal) / 4
    p_e = sum(p * p for p in pooled)
    assert fleiss_kappa(equal) == pytest.approx((p_bar - p_e) / (1 - p_e))


# --------------------------------------------------------------------------- report
def _task(tid: str, label: str, sentence: str) -> dict:
    return {
        "task_id": tid,
        "kind": "sentence",
        "label": label,
        "sentence": sentence,
        "title": "Sam Altman",
        "old_snapshot": "2024-01-01",
        "release": "2024-06-01",
    }


TASKS = [
    _task("n1", "new", "Altman is a prepper."),
    _task("n2", "new", "He chairs Oklo | Helion."),
    _task("n3", "new", "He owns a car."),
    _task("n4", "new", "He likes tea."),
    _task("c1", "changed", "He dropped out of Stanford University."),
    _task("c2", "changed", "He was born in Chicago."),
    _task("c3", "changed", "He lives in San Francisco."),
    _task("c4", "changed", "He founded Loopt."),
    _task("c5", "changed", "Nobody judged this one."),
]
VOTES = {  # task -> (alice, bob, carol); None = did not judge
    "n1": (S, S, N),  # supported: the new label is wrong
    "n2": (N, N, U),  # not supported: right
    "n3": (S, N, U),  # no majority: stands for new (GrowOVER), wrong when strict
    "n4": (U, U, S),  # uncertain: stands for new, wrong when strict
    "c1": (N, N, N),  # right
    "c2": (U, U, N),  # uncertain: wrong for changed
    "c3": (S, N, None),  # two-rater tie: wrong for changed
    "c4": (N, None, None),  # one rater: right
    "c5": (None, None, None),
}


def _judgments() -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for tid, votes in VOTES.items():
        for name, vote in zip(("alice", "bob", "carol"), votes, strict=True):
            if vote is not None:
                out.setdefault(name, {})[tid] = {"task_id": tid, "label": vote, "annotator": name}
    return out


def test_report_scores() -> None:
    report = build_report(TASKS, _judgments(), release="2024-06-01")
    verdicts = {r.task_id: r.verdict for r in report.results}
    assert verdicts == {
        "n1": S,
        "n2": N,
        "n3": NO_MAJORITY,
        "n4": U,
        "c1": N,
        "c2": U,
        "c3": NO_MAJORITY,
        "c4": N,
        "c5": NO_MAJORITY,
    }
    assert report.accuracy("sentence", "new") == pytest.approx(3 / 4)
    assert report.accuracy("sentence", "new", strict=True) == pytest.approx(1 / 4)
    assert report.accuracy("sentence", "changed") == pytest.approx(2 / 4)  # c5 not judged
    assert report.accuracy("sentence", "changed", strict=True) == pytest.approx(2 / 4)
    assert report.annotators == {"alice": 8, "bob": 7, "carol": 6}
    three = build_report(TASKS, _judgments(), release="2024-06-01", min_raters=3)
    assert [r.task_id for r in three.scored("sentence", "changed")] == ["c1", "c2"]
    assert three.accuracy("sentence", "changed") == pytest.approx(1 / 2)
    kappa, n = report.kappa()
    rows = [[list(v).count(c) for c in (S, N, U)] for v in VOTES.values()]
    assert n == 7 and kappa == pytest.approx(fleiss_kappa([r for r in rows if sum(r) >= 2]))


def test_report_markdown_layout() -> None:
    judgments = _judgments()
    judgments["alice"]["gone"] = {"task_id": "gone", "label": S, "annotator": "alice"}
    text = render_markdown(build_report(TASKS, judgments, release="2024-06-01"))
    lines = text.splitlines()
    assert lines[0] == "# Human validation of release 2024-06-01 (old article: 2024-01-01)"
    head = lines.index("| | New | Changed |")
    assert lines[head + 1] == "|---|---:|---:|"
    assert lines[head + 2] == "| Sentence labels: accuracy (%) | 75.0 | 50.0 |"
    assert lines[head + 3] == "| Sentence labels: strict accuracy (%) | 25.0 | 50.0 |"
    assert lines[head + 4] == "| Sentence labels: tasks scored | 4 | 4 |"
    assert "| Sentence labels, new | 1 | 1 | 1 | 1 | 0 |" in lines
    assert "| Sentence labels, changed | 0 | 2 | 1 | 1 | 1 |" in lines
    assert (
        "- tasks with 3 or more raters: 6; with fewer than 3: 2 (2: 1, 1: 1); not judged: 1"
        in lines
    )
    assert "- 1 judgment(s) refer to tasks no longer in tasks.jsonl (ignored)" in lines
    assert "Fleiss' kappa, generalized to unequal rater counts (Gwet)" in text
    disagreements = text.split("## Disagreements")[1].split("## Labels")[0]
    for tid in ("n1", "n2", "n3", "n4", "c2", "c3"):
        assert f"| {tid} |" in disagreements
    assert "| c1 |" not in disagreements and "| c4 |" not in disagreements
    assert "Sam Altman: He chairs Oklo \\| Helion." in disagreements  # pipes escaped
    n1 = next(ln for ln in disagreements.splitlines() if ln.startswith("| n1 |"))
    assert "supported 2, not supported 1 (alice: supported, bob: supported, carol: not" in n1
    rejected = text.split("## Labels the annotators rejected")[1]
    assert [ln.split(" | ")[0] for ln in rejected.splitlines() if ln.startswith("| ")][1:] == [
        "| n1",
        "| c2",
        "| c3",
    ]


def test_report_without_judgments() -> None:
    text = render_markdown(build_report(TASKS, {}, release="2024-06-01"))
    assert "| Sentence labels: accuracy (%) | – | – |" in text
    assert "0 judgments by 0 annotator(s)" in text
    assert "n/a (0 tasks)" in text


def test_cli_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "ann"
    folder = root / "2024-06-01"
    folder.mkdir(parents=True)
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    for name, mine in _judgments().items():
        lines = [json.dumps(rec | {"label": U}) for rec in mine.values()]  # superseded below
        lines += [json.dumps(rec) for rec in mine.values()]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    with (folder / "bob.jsonl").open("a") as fh:
        fh.write('{"task_id": "n1", "lab')  # a torn last line
    args = ["annotate", "report", "--release", "2024-06-01", "--workdir", str(tmp_path)]
    assert main([*args, "--annotations-dir", str(root)]) == 0
    captured = capsys.readouterr()
    saved = (folder / "report.md").read_text()
    assert captured.out == saved + "\n"
    assert "| Sentence labels: accuracy (%) | 75.0 | 50.0 |" in saved
    assert "- 1 malformed line(s) skipped: bob.jsonl:" in saved
    assert "saved" in captured.err
    assert main([*args, "--annotations-dir", str(root), "--min-raters", "0"]) == 2
    assert "--min-raters: 0 is out of range (1 or more)" in capsys.readouterr().err
    missing = ["annotate", "report", "--release", "2025-01-01", "--workdir", str(tmp_path)]
    assert main([*missing, "--annotations-dir", str(root)]) == 2
    assert "annotate sample" in capsys.readouterr().err
