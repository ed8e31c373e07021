"""Temporal question specs: which facts make a C1 / C2 / C3 / timeline question, and the
answers code picks for them."""

from __future__ import annotations

from pipeline.temporal.questions import (
    Fact,
    c2_specs,
    c3_specs,
    current_spec,
    question_specs,
    spoken_date,
    supersession_chains,
)


def fact(
    item_id: str,
    subject: str,
    relation: str,
    obj: str,
    timestamp: str | None = None,
    observed_at: str = "2024-01-01",
    *,
    superseded_by: str | None = None,
    valid_until: str | None = None,
) -> Fact:
    return Fact(
        item_id=item_id,
        page_id=1,
        title=subject,
        subject=subject,
        relation=relation,
        object=obj,
        timestamp=timestamp,
        observed_at=observed_at,
        status="superseded" if superseded_by else "current",
        superseded_by=superseded_by,
        fact_valid_until=valid_until,
        evidence_text=f"{subject} {relation} {obj}.",
    )


COACHES = [
    fact("a", "Chelsea F.C.", "head coach", "Graham Potter", "2022-09", superseded_by="b",
         valid_until="2023-07"),
    fact("b", "Chelsea F.C.", "head coach", "Mauricio Pochettino", "2023-07",
         observed_at="2024-06-01"),
]  # fmt: skip


def test_spoken_dates() -> None:
    assert spoken_date("2024") == "2024"
    assert spoken_date("2024-05") == "May 2024"
    assert spoken_date("2024-05-08") == "8 May 2024"


def test_c1_for_dated_facts_and_chain_members_only() -> None:
    undated = fact("u", "Lisa Su", "is CEO of", "AMD")
    specs = question_specs([*COACHES, undated])
    c1 = [s for s in specs if s.category == "C1"]
    assert [s.facts[0].item_id for s in c1] == ["a", "b"]
    first = c1[0]
    assert first.answer == ("Graham Potter",)
    assert (first.as_of, first.valid_from, first.valid_to) == ("2022-09", "2022-09", "2023-07")
    assert first.time_phrase == "in September 2022"
    # an undated fact in a chain is dated by the snapshot that saw it
    chained = fact("c", "X", "r", "o1", superseded_by="d")
    later = fact("d", "X", "r", "o2", observed_at="2024-06-01")
    c1 = [s for s in question_specs([chained, later]) if s.category == "C1"]
    assert [s.as_of for s in c1] == ["2024-01", "2024-06"]
    assert c1[0].time_phrase == "as of January 2024"


def test_c2_needs_two_objects_at_two_times() -> None:
    (spec,) = c2_specs(COACHES)
    assert spec.answer == ("Graham Potter", "Mauricio Pochettino")
    assert spec.answer_mode == "all"
    assert spec.as_of == "2022-09/2023-07"
    assert spec.time_phrase == "between September 2022 and July 2023"
    same_time = [fact("x", "S", "r", "o1", "2020"), fact("y", "S", "r", "o2", "2020")]
    assert c2_specs(same_time) == []
    same_object = [fact("x", "S", "r", "Paris", "2020"), fact("y", "S", "r", "paris", "2021")]
    assert c2_specs(same_object) == []


def test_c3_bridges_and_shared_objects() -> None:
    newey = fact("n", "Adrian Newey", "will join", "Aston Martin", "2025-03")
    honda = fact("h", "Aston Martin", "will partner with", "Honda", "2026")
    back = fact("k", "Aston Martin", "signed", "Adrian Newey", "2024-09")
    specs = c3_specs([newey, honda, back])
    assert [(s.shape, [f.item_id for f in s.facts], s.answer) for s in specs] == [
        ("bridge", ["n", "h"], ("Aston Martin",))
    ]  # n -> k is the same relation read both ways: not two facts
    assert specs[0].as_of == "2025-03/2026"
    kim = fact("p", "Kimi Antonelli", "drives for", "Mercedes", "2025")
    russell = fact("q", "George Russell", "drives for", "Mercedes", "2022")
    (shared,) = c3_specs([kim, russell])
    assert shared.shape == "shared_object" and shared.answer == ("Mercedes",)
    undated = [fact("p", "A", "r", "E"), fact("q", "B", "r", "E", observed_at="2024-06-01")]
    assert c3_specs(undated) == []  # no date from the text: not a temporal question


def test_timeline_question_keeps_its_id_as_the_chain_grows() -> None:
    (chain,) = supersession_chains(COACHES)
    assert [f.item_id for f in chain] == ["a", "b"]
    before = [s for s in question_specs(COACHES) if s.category == "timeline"][0]
    assert before.answer == ("Mauricio Pochettino",) and before.as_of is None
    grown = [
        COACHES[0],
        fact("b", "Chelsea F.C.", "head coach", "Mauricio Pochettino", "2023-07",
             superseded_by="c", valid_until="2024-07"),
        fact("c", "Chelsea F.C.", "head coach", "Enzo Maresca", "2024-07",
             observed_at="2025-01-01"),
    ]  # fmt: skip
    after = [s for s in question_specs(grown) if s.category == "timeline"][0]
    assert after.question_id == before.question_id
    assert after.answer == ("Enzo Maresca",)


def test_current_spec_drops_questions_the_data_no_longer_answers() -> None:
    (spec,) = c2_specs(COACHES)
    ids = [f.item_id for f in spec.facts]
    again = current_spec("C2", "history", ids, spec.as_of, spec.answer, COACHES)
    assert again is not None and again.question_id == spec.question_id
    # a fact surfacing inside the interval changes the answer: the old question is gone
    interim = fact("i", "Chelsea F.C.", "head coach", "Frank Lampard", "2023-04")
    assert current_spec("C2", "history", ids, spec.as_of, spec.answer, [*COACHES, interim]) is None
    # a fact withdrawn from the ledger takes its questions with it
    assert current_spec("C2", "history", ids, spec.as_of, spec.answer, COACHES[:1]) is None
    c1 = current_spec("C1", "fact", ["a"], "2022-09", ["graham potter"], COACHES)
    assert c1 is not None and c1.answer == ("Graham Potter",)
    assert current_spec("C1", "fact", ["a"], "2022-09", ["Someone Else"], COACHES) is None
