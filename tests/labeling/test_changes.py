"""`changed` means changed: the slot-aware comparison of two sentences, the pair classes it
gives on real Wikipedia revisions of every kind, the update judge's reading of its answers,
and the figures on the whole hand-labeled gold set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.facts import FactExtractor
from pipeline.labeling.changes import (
    ASKABLE_CLASSES,
    DIFFERENT,
    ELABORATION,
    JUDGE_CLASSES,
    REWORDING,
    UNCERTAIN,
    UPDATE,
    JudgeQuestion,
    PairClass,
    UpdateJudge,
    classify_pair,
    distinct_entities,
    judge_question,
    label_of,
    one_name,
    read_span,
)
from pipeline.labeling.growover_matcher import round2
from pipeline.slots import Replacement, compare_slots
from tests.conftest import REPO_ROOT

GOLD = REPO_ROOT / "benchmarks" / "data" / "changed_gold.jsonl"


@pytest.fixture(scope="module")
def facts() -> FactExtractor:
    return FactExtractor()


def _slots(facts: FactExtractor, old: str, new: str):  # noqa: ANN202
    old_spans, new_spans = facts.entity_spans_many([old, new])
    return compare_slots(old, new, old_spans, new_spans)


# --------------------------------------------------------------------------- compare_slots
def test_a_value_replaced_in_its_role(facts: FactExtractor) -> None:
    slots = _slots(
        facts,
        "In December 2004, the National Response Plan (NRP) was created.",
        "In December 2005, the National Response Plan (NRP) was created.",
    )
    assert [(r.kind, r.old, r.new) for r in slots.replaced] == [
        ("time", "December 2004", "December 2005")
    ]
    assert not slots.removed and not slots.added


def test_more_or_less_precise_times_are_the_same_value(facts: FactExtractor) -> None:
    refined = _slots(
        facts,
        "Arvind Krishna (born 1962) is an Indian-American business executive.",
        "Arvind Krishna (born November 23, 1962) is an Indian-American business executive.",
    )
    coarser = _slots(
        facts,
        "The film was released to theaters and HBO Max on December 25, 2020.",
        "The film was released to theaters and HBO Max in December 2020.",
    )
    for slots in (refined, coarser):
        assert not slots.replaced and not slots.removed and not slots.added


def test_a_repeated_value_is_not_taken_twice(facts: FactExtractor) -> None:
    slots = _slots(
        facts,
        "Three other players and three contributors have also been enshrined.",
        "Three other players and four coaches/contributors have also been enshrined.",
    )
    assert [(r.old, r.new) for r in slots.replaced] == [("three", "four")]


def test_year_ranges_and_formula_digits(facts: FactExtractor) -> None:
    season = _slots(
        facts,
        "In the 2023–2024 season, the Nuggets finished second.",
        "In the 2023–24 season, the Nuggets finished second.",
    )
    assert not season.replaced and not season.removed
    formula = _slots(
        facts,
        "notice that for large t, the variable x_t|x_0 ~ N (√(ᾱ_t) x_0, (1-ᾱ_t) I) converges.",
        "notice that for large t, the variable x_t|x_0 ~ N (√(ᾱ_t) x_0, σ_t^2 I) converges.",
    )
    assert not formula.replaced  # notation, not a value of the world


def test_additions_and_removals_are_not_replacements(facts: FactExtractor) -> None:
    added = _slots(
        facts,
        "On August 7, 2020, Cisco completed its acquisition of ThousandEyes.",
        "On August 7, 2020, Cisco completed its acquisition of ThousandEyes for around $1 billion.",
    )
    assert not added.replaced and [v.text for v in added.added] == ["$1 billion"[1:]]
    removed = _slots(
        facts,
        "It uses up to two AMD Radeon Pro GPUs, based on RDNA 1 architecture.",
        "It uses up to two AMD Radeon Pro GPUs, based on RDNA architecture.",
    )
    assert not removed.replaced and [v.text for v in removed.removed] == ["1"]


@pytest.mark.parametrize(
    ("old", "new", "edges"),
    [
        ("It includes WarnerMedia's HBO Max.", "It includes WarnerMedia's Max.", ("HBO",)),
        ("It races as Haas F1 Team.", "It races as MoneyGram Haas F1 Team.", ("MoneyGram",)),
        (
            "It was bought by Time Warner in 1996.",
            "It was bought by Time Warner Entertainment in 1996.",
            ("Entertainment",),
        ),
        ("Florence Pugh is an actress.", "Florence Rose Pugh is an actress.", ()),  # middle
        ("Talks with Discovery Inc. ended.", "Talks with Discovery ended.", ()),  # legal form
        ("He starred in Gladiator.", "He starred in Ridley Scott's Gladiator.", ()),  # owner
        ("Xbox sales grew.", "New Xbox sales grew.", ()),  # the first word is capitalised anyway
        ("It sells iPhone and Mac.", "It sells iPhone, Watch and Mac.", ()),  # a list grew
    ],
)
def test_a_name_grown_or_cut_at_one_end(
    facts: FactExtractor, old: str, new: str, edges: tuple[str, ...]
) -> None:
    assert _slots(facts, old, new).name_edges == edges


# --------------------------------------------------------------------------- classify_pair
# Real pairs of the gold set (wikisnap revisions), one or more of every kind and every rule.
PAIRS = [
    (
        "The competition has been won by 22 clubs, 13 of which have won it more than once.",
        "The competition has been won by 23 clubs, 13 of which have won it more than once.",
        UPDATE,
        "value_replaced",
    ),
    (
        "Though Allen's career record against Miami currently stands at 9–2, Tagovailoa led "
        "the Dolphins to their first win over Bills in 8 games in 2022.",
        "Though Allen's career record against Miami currently stands at 11–2, Tagovailoa led "
        "the Dolphins to their first win over Bills in 8 games in 2022.",
        UPDATE,
        "value_replaced",
    ),
    (
        "macOS Ventura, the current release of macOS, will work with Wi-Fi and graphics "
        "acceleration on unsupported MacBook Air computers with a compatible patch utility.",
        "macOS Sonoma, the current release of macOS, will work with Wi-Fi and graphics "
        "acceleration on unsupported MacBook Air computers with a compatible patch utility.",
        UPDATE,
        "entity_replaced",
    ),
    (
        "Haas would only field one driver, rather than replace Mazepin with reserve driver "
        "Kevin Magnussen, as he had not fulfilled the requirement.",
        "Haas would only field one driver, rather than replace Mazepin with reserve driver "
        "Pietro Fittipaldi, as he had not fulfilled the requirement.",
        UPDATE,
        "entity_replaced",
    ),
    (
        "Arvind Krishna (born 1962) is an Indian-American business executive, and the "
        "chairman and CEO of IBM.",
        "Arvind Krishna (born November 23, 1962) is an Indian-American business executive, "
        "and the chairman and CEO of IBM.",
        ELABORATION,
        "details_added",
    ),
    (
        "The team, owned by Lawrence Stroll, has Fernando Alonso and Lance Stroll as their "
        "race drivers beginning with the 2023 season.",
        "The team, owned by Lawrence Stroll, has Fernando Alonso, a 2-time champion from Spain, "
        "and Lance Stroll of Canada as their race drivers beginning with the 2023 season.",
        ELABORATION,
        "details_added",
    ),
    (
        "Su and her husband Dan are based in Austin, Texas.",
        "Su and her husband, Daniel Lin, are based in Austin, Texas.",
        UNCERTAIN,  # a name completed, not replaced: never an update
        "value_replaced_loosely",
    ),
    (
        "In 2018 the IEA was criticized in Davos by Saudi Arabia's Oil Minister Al-Falih, for "
        "hyping the US shale oil industry.",
        "In 2018, the IEA was criticized at the World Economic Forum by Saudi Arabia's Oil "
        "Minister Al-Falih, for hyping the US shale oil industry.",
        UNCERTAIN,  # a place named by its event: not an update
        "value_replaced_loosely",
    ),
    (
        "In an SEC Filing on November 18, 2021, Discovery Inc. revealed that talks with AT&T "
        "had fallen through.",
        "In an SEC Filing on November 18, 2021, Discovery revealed that talks with AT&T had "
        "fallen through.",
        REWORDING,
        "same_facts",
    ),
    (
        "In addition, Aston Martin will produce its own transmission gearbox package for the "
        "first time.",
        "In addition, the Silverstone-based team will produce its own transmission gearbox "
        "package for the first time.",
        UNCERTAIN,
        "value_replaced_loosely",
    ),
    (
        "Pugh will next play Princess Irulan in Dune: Part Two, a sequel to the 2021 science "
        "fiction film.",
        "Pugh next played Princess Irulan in Dune: Part Two, a sequel to the 2021 science "
        "fiction film.",
        UPDATE,  # the plan's own verb, done
        "plan_carried_out",
    ),
    (
        "Michael Roman will remain in the role of Executive Chairman.",
        "Michael Roman would remain in the role of executive chairman.",
        REWORDING,  # reported speech, not a plan carried out
        "same_facts",
    ),
    (
        "The team has had some periods of success, qualifying for the ABA playoffs in every "
        "season of the ABA's existence.",
        "The team has had some periods of success, qualifying for the ABA playoffs in every "
        "season of the ABA's existence (except 1971 and 1974).",
        UNCERTAIN,  # "except" may take back what the old sentence said: not unchanged
        "ended_or_excepted",
    ),
    (
        "The first direct evidence for dark energy came from supernova observations in 1998 of "
        "accelerated expansion in Riess et al.",
        "Since the discovery of accelerating expansion, several independent lines of evidence "
        "have been discovered that support the existence of dark energy.",
        DIFFERENT,
        "other_statement",
    ),
    (
        "The Nuggets' playoff dominance continued in the Conference Finals; the team swept "
        "the Los Angeles Lakers in four games to secure their first ever NBA Finals appearance.",
        "In the NBA Finals, on June 12, 2023, the Nuggets would beat the Eastern Conference "
        "champion Miami Heat 4–1 to win their first NBA championship.",
        UNCERTAIN,  # names replaced in a sentence that says something else: never changed
        "value_replaced_loosely",
    ),
    (  # UEFA Champions League, 2024-06 -> 2025-01: a list grew; "third" is still there
        "The two streams are divided between teams qualified by virtue of being league "
        "champions, and those qualified by virtue of finishing second or third in their "
        "national championship.",
        "The two streams are divided between teams qualified by virtue of being league "
        "champions, and those qualified by virtue of finishing second, third or fourth in "
        "their national championship.",
        ELABORATION,
        "details_added",
    ),
    (  # Sony Music, 2024-06 -> 2025-01: "1991" is still there, in another role; an update
        "Sony bought the company in 1991 and renamed it SME.",
        "Sony bought the company in 1988 and renamed it SME in 1991.",
        UPDATE,
        "value_replaced",
    ),
    (  # Warner Bros. Discovery, 2023-06 -> 2024-01: the service was renamed
        "The company will aim to expand their streaming services, which includes WarnerMedia's "
        "HBO Max, to reach 400 million global subscribers.",
        "The company will aim to expand their streaming services, which includes WarnerMedia's "
        "Max, to reach 400 million global subscribers.",
        UNCERTAIN,  # a name cut at one end: maybe another name, never unchanged
        "name_extended",
    ),
    (  # Haas F1 Team, 2023-01 -> 2023-06: a sponsor's name came to the front
        "Haas Formula LLC, competing as Haas F1 Team, is an American-licensed Formula One "
        "racing team established by NASCAR Cup Series team co-owner Gene Haas in April 2014.",
        "Haas Formula LLC, competing as MoneyGram Haas F1 Team, is an American-licensed "
        "Formula One racing team established by NASCAR Cup Series team co-owner Gene Haas in "
        "April 2014.",
        UNCERTAIN,
        "name_extended",
    ),
    (  # Florence Pugh, 2024-01 -> 2024-06: a middle name is no other name
        "Florence Rose Pugh was born on 3 January 1996 in Oxford to dancer Deborah and "
        "restaurateur Clinton Pugh.",
        "Florence Pugh was born on 3 January 1996 in Oxford to dancer Deborah and restaurateur "
        "Clinton Pugh.",
        REWORDING,
        "same_facts",
    ),
    (  # MacBook Air, 2024-01 -> 2024-06: a schedule in the present, then in the past
        "Ordering the 15-inch MacBook Air starts on June 5, with the general availability "
        "starting on June 13.",
        "Ordering the 15-inch MacBook Air started on June 5, with the general availability "
        "having started on June 13.",
        UNCERTAIN,  # done, or only the tense harmonised: the words cannot tell
        "present_to_past",
    ),
    (  # 3M, 2023-01 -> 2023-06: a sentence split in two; the month "May" is no modal "may"
        "On May 1, 2020, 3M divested substantially all of its drug delivery business to an "
        "affiliate of Altaris Capital Partners, LLC., for approximately $650 million including "
        "a 17% interest in the new operating company, Kindeva Drug Delivery.",
        "for approximately $650 million, including a 17% interest in the new operating "
        "company, Kindeva Drug Delivery.",
        DIFFERENT,  # too little of the old sentence left to call it the same statement
        "other_statement",
    ),
    (  # `make run`'s sample (iPhone 15, 2024-01 -> 2024-06): a number gone, a name in its place
        "The Dynamic Island feature is now standard on iPhone 15, replacing the notch that was "
        "introduced from the iPhone 13.",
        "The Dynamic Island feature is now standard on iPhone 15, replacing the notch that was "
        "introduced in the iPhone X.",
        UNCERTAIN,
        "value_displaced",
    ),
]


@pytest.mark.parametrize(("old", "new", "kind", "rule"), PAIRS)
def test_real_pairs_of_every_class(
    facts: FactExtractor, old: str, new: str, kind: str, rule: str
) -> None:
    verdict = classify_pair(_slots(facts, old, new), 0.9)
    assert (verdict.kind, verdict.rule) == (kind, rule), verdict


def test_labels_of_the_classes() -> None:
    assert label_of(PairClass(UPDATE, "value_replaced"), 0.9, 0.7) == "changed"
    assert label_of(PairClass(REWORDING, "same_facts"), 0.9, 0.7) == "unchanged"
    assert label_of(PairClass(ELABORATION, "details_added"), 0.9, 0.7) == "unchanged"
    assert label_of(PairClass(DIFFERENT, "other_statement"), 0.7, 0.7) == "new"
    assert label_of(PairClass(DIFFERENT, "other_statement"), 0.71, 0.7) == "unlabeled"
    assert label_of(PairClass(UNCERTAIN, "planned_to_done"), 0.9, 0.7) == "unlabeled"


# --------------------------------------------------------------------------- the judge
def _question(facts: FactExtractor, old: str, new: str):  # noqa: ANN202
    slots = _slots(facts, old, new)
    return judge_question(old, new, classify_pair(slots, 0.9), slots)


GREAT_WALL = (
    "In 2017, he starred as Agent Whiskey in Matthew Vaughn's Kingsman: The Golden Circle and "
    "as mercenary Pero Tovar in The Great Wall, alongside Matt Damon.",
    "In 2016, he portrayed mercenary Pero Tovar in the fantasy action film The Great Wall, "
    "alongside Matt Damon, and directed by Zhang Yimou.",
)
LIGO_INDIA = (
    "As of July 2021, the LIGO-India project was still waiting for 'full-approval' from the "
    "Cabinet of Government of India.",
    "On 7 April 2023, the LIGO-India project was approved by the Cabinet of Government of India.",
)


def test_the_judge_is_asked_about_a_value_replaced_in_a_rewritten_sentence(
    facts: FactExtractor,
) -> None:
    q = _question(facts, *GREAT_WALL)
    assert q is not None and (q.part, q.kind) == ("2017", "time")
    assert q.old_marked.startswith("In [[2017]], he starred")
    assert read_span(q, "2016") is True  # another year in its place: an update
    assert read_span(q, "In 2016") is True
    assert read_span(q, "NONE") is None
    assert read_span(q, "2017") is None  # not words of the new sentence
    assert read_span(q, "Matt Damon") is None  # no year in the span: it tells nothing
    approved = _question(facts, *LIGO_INDIA)
    assert approved is not None and approved.part == "July 2021"
    assert read_span(approved, "7 April 2023") is True


def test_pairs_the_judge_is_not_asked_about(facts: FactExtractor) -> None:
    # A close match is settled by the alignment; a name, a plan and another statement are not
    # the judge's (its answers about them were wrong more often than right).
    for old, new in (
        PAIRS[0][:2],  # 22 -> 23 clubs: value_replaced, no question
        (
            "Pugh will next play Princess Irulan in Dune: Part Two.",
            "Pugh next played Princess Irulan in Dune: Part Two.",
        ),
        (
            "In addition, Aston Martin will produce its own transmission gearbox package.",
            "In addition, the Silverstone-based team will produce its own transmission gearbox.",
        ),
    ):
        assert _question(facts, old, new) is None


def test_every_askable_class_gets_its_own_question(facts: FactExtractor) -> None:
    """Asked about every class (as `bench_changed --judge-only` does), a plan carried out and
    a value moved and changed get questions; the default classes do not include them; a class
    no question is written for is refused."""
    from pipeline.models.llm.scripted import ScriptedBackend

    plan = (
        "The iPhone 15 and the iPhone 15 Plus will include iOS 17.",
        "The iPhone 15 and 15 Plus launched with iOS 17.",
    )

    def asked(pair: tuple[str, str], rule: str, classes: tuple[str, ...] = ASKABLE_CLASSES):  # noqa: ANN202
        slots = _slots(facts, *pair)
        verdict = classify_pair(slots, 0.85)
        assert verdict.rule == rule
        return judge_question(*pair, verdict, slots, classes)

    assert asked(plan, "planned_to_done", JUDGE_CLASSES) is None
    q = asked(plan, "planned_to_done")
    assert q is not None and (q.part, q.kind, q.pair_class) == (
        "will include",
        "status",
        "planned_to_done:status",
    )
    assert read_span(q, "launched") is True  # done
    assert read_span(q, "launched with") is True
    assert read_span(q, "will launch") is None  # not words of the new sentence
    assert read_span(q, "NONE") is None
    still = JudgeQuestion(q.old_marked, "It will ship iOS 17.", q.part, "status", q.pair_class)
    assert read_span(still, "will ship") is False  # still a plan
    moved = (
        "In 2019, the company opened its first store in Berlin.",
        "The company opened its first store in Berlin, which closed in 2021 after two years.",
    )
    q = asked(moved, "value_moved_and_changed")
    assert q is not None and q.pair_class == "value_moved_and_changed:time"
    assert q.old_marked.startswith("In [[2019]]")
    assert read_span(q, "2021") is True
    assert set(JUDGE_CLASSES) <= set(ASKABLE_CLASSES)
    with pytest.raises(ValueError, match="no judge question is written for"):
        UpdateJudge(ScriptedBackend(lambda request: "{}"), ["value_displaced:entity"])


def test_the_judge_batches_its_questions_through_the_backend(facts: FactExtractor) -> None:
    from pipeline.models.llm.scripted import ScriptedBackend

    asked: list[str] = []

    def answer(request) -> str:  # noqa: ANN001
        user = request.messages[-1]["content"]
        asked.append(user)
        return json.dumps({"span": "2016" if "Pero Tovar" in user else "NONE"})

    judge = UpdateJudge(ScriptedBackend(answer))
    questions = [_question(facts, *GREAT_WALL), _question(facts, *LIGO_INDIA)]
    assert judge.settle(questions) == [True, None]
    assert judge.calls == 2 and len(asked) == 2
    assert "[[2017]]" in asked[0] and judge.model_id.startswith("scripted:")


# --------------------------------------------------------------------------- the gold set
def _rule_figures(gold: list[dict], labels: list[str]) -> dict[str, float]:
    def share(cls: str, label: str) -> float:
        picked = [lab for g, lab in zip(gold, labels, strict=True) if g["gold"] == cls]
        return sum(lab == label for lab in picked) / len(picked)

    changed = [g["gold"] for g, lab in zip(gold, labels, strict=True) if lab == "changed"]
    updates = sum(g["gold"] == "UPDATE" for g in gold)
    return {
        "precision": changed.count("UPDATE") / len(changed),
        "recall": changed.count("UPDATE") / updates,
        "elaborations_changed": share("ELABORATION", "changed"),
        "rewordings_changed": share("REWORDING", "changed"),
        "rewordings_unchanged": share("REWORDING", "unchanged"),
        "updates_unchanged": share("UPDATE", "unchanged"),
    }


def test_rules_alone_on_the_gold_set(facts: FactExtractor) -> None:
    """The word alignment alone (no judge) on the hand-labeled pairs, with the similarity
    MiniLM gave each. The first 480 (sets ``random`` and ``enriched``, drawn at random) meet
    the targets: changed precision >= 90%, recall >= 50%, elaborations and rewordings
    labeled changed <= 5% each, rewordings unchanged >= 50%, updates unchanged <= 5%. On all
    1,515 (every candidate pair of the 36 articles, status changes included) the measured
    figures hold: precision >= 0.9, recall >= 0.43, updates labeled unchanged <= 10%."""
    gold = [json.loads(line) for line in Path(GOLD).read_text().splitlines()]
    texts = sorted({t for g in gold for t in (g["old"], g["new"])})
    spans = dict(zip(texts, facts.entity_spans_many(texts), strict=True))
    labels = []
    for g in gold:
        slots = compare_slots(g["old"], g["new"], spans[g["old"]], spans[g["new"]])
        verdict = classify_pair(slots, g["cosine"])
        labels.append(label_of(verdict, float(round2(g["cosine"])), 0.7))
    drawn = [k for k, g in enumerate(gold) if g["set"] in ("random", "enriched")]
    assert len(drawn) == 480 and len(gold) == 1515
    first = _rule_figures([gold[k] for k in drawn], [labels[k] for k in drawn])
    assert first["precision"] >= 0.9 and first["recall"] >= 0.5, first
    assert first["elaborations_changed"] <= 0.05 and first["rewordings_changed"] <= 0.05
    assert first["rewordings_unchanged"] >= 0.5 and first["updates_unchanged"] <= 0.05
    every = _rule_figures(gold, labels)
    assert every["precision"] >= 0.9 and every["recall"] >= 0.43, every
    assert every["elaborations_changed"] <= 0.05 and every["rewordings_changed"] <= 0.05
    assert every["rewordings_unchanged"] >= 0.5 and every["updates_unchanged"] <= 0.1


def test_two_parts_of_one_name_are_not_an_update(facts: FactExtractor) -> None:
    # Pedro Pascal, 2024-06 -> 2025-01: the article names "Zhang Yimou" in full elsewhere
    old = "Pascal has voiced his admiration for Yimou, whom he had been a fan of during his youth."
    new = "Pascal has voiced his admiration for Zhang, whom he had been a fan of during his youth."
    slots = _slots(facts, old, new)
    verdict = classify_pair(slots, 0.95)
    assert (verdict.kind, verdict.rule) == (UPDATE, "entity_replaced")
    article = [old, "He starred in Great Wall, directed by Zhang Yimou."]
    assert one_name(verdict, slots, [article]).rule == "name_variant"
    assert one_name(verdict, slots, [[old], [new]]) == verdict  # nothing joins the two names


def test_an_abbreviation_and_its_expansion_are_one_entity() -> None:
    from pipeline.labeling.changes import is_alias

    assert is_alias("IEA", "International Energy Agency")
    assert is_alias("United States", "U.S.")
    assert is_alias("F1", "Formula One")
    assert not is_alias("PIS", "PIN")  # two abbreviations: a correction, not an alias
    assert not is_alias("Apple", "Microsoft")
    renamed = Replacement("entity", "IEA", "International Energy Agency", "ORG", "ORG", True)
    assert not distinct_entities(renamed)


def test_a_former_name_written_beside_the_new_one_is_no_replacement() -> None:
    from pipeline.labeling.changes import former_name_beside
    from pipeline.slots import SlotDiff

    r = Replacement("entity", "Facebook", "Meta", "ORG", "ORG", True)
    slots = SlotDiff((r,), (), (), (), (), 0.9, 0.9, "Facebook", "Meta ( formerly Facebook )")
    assert distinct_entities(r) and former_name_beside(r, slots)
    assert classify_pair(slots, 0.95).rule != "entity_replaced"
    plain = SlotDiff((r,), (), (), (), (), 0.9, 0.9, "Facebook", "Meta")
    assert not former_name_beside(r, plain)
    assert classify_pair(plain, 0.95).rule == "entity_replaced"
