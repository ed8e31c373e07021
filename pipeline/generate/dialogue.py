"""GrowOVER-Dialogue: the dialogue and its turns, the answer the model writes, the requests,
their parsing and the checks.

One request per paragraph: the paragraph's sentences with their article-level index, the
article title as the topic, and the allowed number of turns. Each returned turn names the
one sentence its expert reply used; the turn's type is that sentence's label (``new`` for an
article generated from scratch, else unchanged / changed / new from the labeling stage).

Parsing never raises: an unusable answer becomes a :class:`Reject` with a reason code. A
dialogue whose turn fails a check is cut before that turn (later turns build on earlier
ones) and kept when the minimum number of turns remains; the dropped turns are a reject
(:class:`DialogueChecks`: ``ItemValidator.score_dialogue`` / ``score_turns`` /
``turns_to_keep``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pipeline.config import GenerationConfig
from pipeline.generate.grammar_checks import (
    answers_kind,
    asks_for,
    is_cut_off,
    names_no_subject,
    open_question,
    reply_additions,
    user_premise_problem,
)
from pipeline.generate.items import (
    FieldError,
    Reject,
    field_reject,
    field_value,
    index_field,
    make_item_id,
    response_reject,
    text_field,
)
from pipeline.generate.kinds import Batch, ItemGenerator, KindOutput, reject_of
from pipeline.generate.prompts import (
    MAX_CHARS,
    AnswerModel,
    answer_schema,
    load_prompt,
    number_sentences,
    register_answer_models,
)
from pipeline.generate.selection import Article, ArticleParagraph, dialogue_paragraphs
from pipeline.generate.validate import Check, Verdict, evidence_checks, script_check, url_check
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.text_checks import (
    content_words,
    leaning_phrase,
    supporting_sentence,
    turn_support,
    undated_figure,
)


class DialogueTurnAnswer(AnswerModel):
    """One user/expert exchange and the sentence index the expert used."""

    sentence: int
    user: str
    expert: str


class DialogueAnswer(AnswerModel):
    """Answer of ``dialogue``."""

    turns: list[DialogueTurnAnswer]


register_answer_models({"dialogue": DialogueAnswer})


@dataclass
class DialogueTurn:
    """One user/expert exchange; its evidence is one sentence of the dialogue's paragraph."""

    turn_idx: int
    user: str
    expert: str
    evidence_sent_idx: list[int]
    evidence_text: str
    type: str


@dataclass
class Dialogue:
    """A 3-4 turn conversation grounded in one paragraph; stored one row per turn."""

    page_id: int
    title: str
    snapshot: str
    para_idx: int
    turns: list[DialogueTurn]
    prompt_hash: str
    generator: str
    raw_output: str
    dialogue_id: str = ""

    def __post_init__(self) -> None:
        if not self.dialogue_id:
            self.dialogue_id = make_item_id(
                "dialogue",
                self.page_id,
                self.snapshot,
                [i for t in self.turns for i in t.evidence_sent_idx],
                [self.para_idx] + [[t.user, t.expert] for t in self.turns],
            )

    def rows(self) -> list[dict[str, Any]]:
        """One Parquet row per turn."""
        return [
            {
                "dialogue_id": self.dialogue_id,
                "turn_id": f"{self.dialogue_id}:{t.turn_idx}",
                "turn_idx": t.turn_idx,
                "n_turns": len(self.turns),
                "page_id": self.page_id,
                "title": self.title,
                "snapshot": self.snapshot,
                "para_idx": self.para_idx,
                "user": t.user,
                "expert": t.expert,
                "evidence_sent_idx": list(t.evidence_sent_idx),
                "evidence_text": t.evidence_text,
                "type": t.type,
                "prompt_hash": self.prompt_hash,
                "generator": self.generator,
            }
            for t in self.turns
        ]

    def as_json(self) -> dict[str, Any]:
        """Plain dict (for the rejects table)."""
        return asdict(self) | {"raw_output": None}


@dataclass(eq=False)
class DialogueTask:
    """One dialogue request and what is needed to turn its answer into a dialogue."""

    article: Article
    paragraph: ArticleParagraph
    request: LLMRequest

    @property
    def offered(self) -> tuple[int, ...]:
        """The sentence indices the turns may cite."""
        return self.paragraph.sent_idx


def dialogue_task(
    article: Article, paragraph: ArticleParagraph, cfg: GenerationConfig
) -> DialogueTask:
    """A ``dialogue`` request for one paragraph."""
    request = load_prompt("dialogue").request(
        schema=answer_schema(
            "dialogue",
            indices=paragraph.sent_idx,
            min_items=cfg.dialogue_min_turns,
            max_items=cfg.dialogue_max_turns,
        ),
        title=article.title,
        sentences=number_sentences(paragraph.sent_idx, paragraph.texts),
        min_turns=cfg.dialogue_min_turns,
        max_turns=cfg.dialogue_max_turns,
    )
    return DialogueTask(article, paragraph, request)


def _turns(parsed: dict[str, Any]) -> list[dict[str, Any]]:
    turns = field_value(parsed, "turns")
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise FieldError("wrong_type", "'turns' is not a list of objects")
    return turns


def parse_dialogue(task: DialogueTask, response: LLMResponse, generator: str) -> Dialogue | Reject:
    """Turn one response into a candidate dialogue (validated later) or a reject."""
    article = task.article
    prompt_hash = task.request.prompt_hash
    where = ("dialogue", "dialogue", article.page_id, article.snapshot)
    rejected = response_reject(*where, response, prompt_hash)
    if rejected is not None:
        return rejected
    parsed = response.parsed or {}
    turns: list[DialogueTurn] = []
    offered = dict(zip(task.paragraph.sent_idx, task.paragraph.texts, strict=True))
    try:
        for turn_idx, raw in enumerate(_turns(parsed)):
            expert = text_field(raw, "expert")
            cited = index_field(raw, "sentence")
            # A reply is credited to the paragraph sentence that states it (the model's own
            # citation when that holds, often its neighbour otherwise).
            idx = supporting_sentence(expert, cited, offered, article.title)
            in_range = 0 <= idx < article.n_sentences
            turns.append(
                DialogueTurn(
                    turn_idx=turn_idx,
                    user=text_field(raw, "user"),
                    expert=expert,
                    evidence_sent_idx=[idx],
                    evidence_text=article.texts[idx] if in_range else "",
                    # Out of range: no label; validation rejects it for the index first.
                    type=article.label_of(idx) if in_range else "unlabeled",
                )
            )
    except FieldError as err:
        return field_reject(*where, response, prompt_hash, err, parsed)
    return Dialogue(
        page_id=article.page_id,
        title=article.title,
        snapshot=article.snapshot,
        para_idx=task.paragraph.para_idx,
        turns=turns,
        prompt_hash=prompt_hash,
        generator=generator,
        raw_output=response.text,
    )


def _repeated_turns(turns: Sequence[DialogueTurn]) -> str:
    """Which expert replies say little an earlier one did not: 80% of their content words in
    one earlier reply ("Paying for College is a tool that estimates ..." after a reply that
    described it). A short paragraph may serve two turns from one sentence, but then each
    must bring a different detail."""
    seen: list[tuple[int, set[str]]] = []
    for t in turns:
        words = set(content_words(t.expert))
        for idx, earlier in seen:
            shared = len(words & earlier)
            if words and earlier and shared >= 0.8 * len(words):
                return f"turn {t.turn_idx} repeats turn {idx}"
        seen.append((t.turn_idx, words))
    return ""


class DialogueChecks:
    """The checks of a dialogue and of each of its turns: ``score_dialogue``, ``score_turns``
    and ``turns_to_keep`` of :class:`pipeline.generate.validator.ItemValidator`, which holds
    these limits."""

    dialogue_min_turns: int
    dialogue_max_turns: int
    turn_min_share: float
    question_grammar: bool

    def score_dialogue(
        self, dialogue: Dialogue, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of a whole dialogue; ``allowed`` = the sentence indices of its paragraph."""
        n = len(dialogue.turns)
        checks = [
            Check(
                "bad_turn_count",
                self.dialogue_min_turns <= n <= self.dialogue_max_turns,
                f"{n} turns, want {self.dialogue_min_turns}-{self.dialogue_max_turns}",
            )
        ]
        texts = [
            (f"turn {t.turn_idx} {side}", text)
            for t in dialogue.turns
            for side, text in (("user", t.user), ("expert", t.expert))
        ]
        empty = [name for name, text in texts if not text.strip()]
        checks.append(Check("empty_field", not empty, ", ".join(empty)))
        checks.append(
            url_check(
                texts, [(f"turn {t.turn_idx} evidence", t.evidence_text) for t in dialogue.turns]
            )
        )
        checks.append(
            script_check(texts, [(f"turn {t.turn_idx}", t.evidence_text) for t in dialogue.turns])
        )
        indices = [i for t in dialogue.turns for i in t.evidence_sent_idx]
        one_each = all(len(t.evidence_sent_idx) == 1 for t in dialogue.turns)
        checks += evidence_checks(indices if one_each else [], n_sentences, allowed)
        unlabeled = [
            t.turn_idx for t in dialogue.turns if t.type not in ("new", "changed", "unchanged")
        ]
        checks.append(
            Check("evidence_unlabeled", not unlabeled, f"turns {unlabeled}" if unlabeled else "")
        )
        phrases = [
            p
            for t in dialogue.turns
            for p in (leaning_phrase(t.user), leaning_phrase(t.expert))
            if p
        ]
        checks.append(Check("turn_leans_on_text", not phrases, ", ".join(phrases)))
        share = self.turn_min_share
        unsupported = [
            f"turn {t.turn_idx}: {why}"
            for t in dialogue.turns
            if (why := turn_support(t.expert, t.evidence_text, dialogue.title, share))
        ]
        checks.append(Check("turn_not_grounded", not unsupported, "; ".join(unsupported)))
        repeats = _repeated_turns(dialogue.turns)
        checks.append(Check("repeated_turn", not repeats, repeats))
        return Verdict(tuple(checks))

    def score_turns(self, dialogue: Dialogue) -> list[Verdict]:
        """The checks of each turn on its own (its texts, its sentence, the turns before it),
        one verdict per turn, in turn order."""
        verdicts = []
        for k, t in enumerate(dialogue.turns):
            texts = [("user", t.user), ("expert", t.expert)]
            evidence = [("evidence", t.evidence_text)]
            phrases = [p for p in (leaning_phrase(t.user), leaning_phrase(t.expert)) if p]
            support = turn_support(t.expert, t.evidence_text, dialogue.title, self.turn_min_share)
            repeats = _repeated_turns(dialogue.turns[: k + 1])
            checks = [
                url_check(texts, evidence),
                script_check(texts, evidence),
                Check("turn_leans_on_text", not phrases, ", ".join(phrases)),
                Check("turn_not_grounded", not support, support),
                Check("repeated_turn", not repeats, repeats),
            ]
            if self.question_grammar:
                cut = [side for side, text in texts if is_cut_off(text, MAX_CHARS[side])]
                added = reply_additions(t.expert, [t.evidence_text, dialogue.title, t.user])
                undated = undated_figure(f"{t.user} {t.expert}", t.evidence_text)
                kind = asks_for(t.user)
                unanswered = kind is not None and not answers_kind(t.expert, kind, t.evidence_text)
                said = [t.evidence_text, dialogue.title]
                said += [text for u in dialogue.turns[:k] for text in (u.user, u.expert)]
                premise = user_premise_problem(t.user, said)
                opened = open_question(t.user)
                # the opening question is all a reader has to go on: it must name its subject
                unnamed = names_no_subject(t.user, dialogue.title) if k == 0 else ""
                checks += [
                    Check("question_names_nothing", not unnamed, unnamed),
                    Check("turn_premise_unstated", not premise, premise),
                    Check("turn_open_question", not opened, opened),
                    Check("turn_cut_off", not cut, ", ".join(cut)),
                    Check("turn_adds_claims", not added, added),
                    Check("turn_drops_date", not undated, undated),
                    Check("turn_not_answered", not unanswered,
                          f"asked {kind!r}, the reply gives none" if unanswered else ""),
                ]  # fmt: skip
            verdicts.append(Verdict(tuple(checks)))
        return verdicts

    def turns_to_keep(
        self, dialogue: Dialogue, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> tuple[int, Verdict]:
        """How many leading turns of ``dialogue`` to keep, and the verdict that decided: a
        failed check of the dialogue as a whole keeps none; else every turn before the first
        one that fails its own checks, when at least the minimum number remain (later turns
        build on the bad one). The verdict is the whole dialogue's when it failed or every
        turn passed, else the first failing turn's."""
        whole = self.score_dialogue(dialogue, n_sentences=n_sentences, allowed=allowed)
        shared = Verdict(tuple(c for c in whole.checks if c.name in DIALOGUE_CHECKS))
        if not shared.keep:
            return 0, shared
        per_turn = self.score_turns(dialogue)
        first_bad = next((v for v in per_turn if not v.keep), shared)
        return good_turns(per_turn, self.dialogue_min_turns), first_bad


# Checks of a dialogue as a whole: a failure rejects every turn.
DIALOGUE_CHECKS = frozenset(
    {"bad_turn_count", "empty_field", "evidence_out_of_range", "evidence_outside_input",
     "evidence_unlabeled"}
)  # fmt: skip


def good_turns(turn_verdicts: Sequence[Verdict], min_turns: int) -> int:
    """How many turns of a dialogue to keep: every turn before the first that fails a check
    (later turns build on it), or none when fewer than ``min_turns`` remain."""
    n = next((k for k, v in enumerate(turn_verdicts) if not v.keep), len(turn_verdicts))
    return n if n >= min_turns else 0


def run_dialogues(tasks: list[DialogueTask], batch: Batch) -> KindOutput:
    """Ask every dialogue task of a shard and keep each dialogue's turns up to its first bad
    one (one row per turn)."""
    rows: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    kept = 0
    responses = batch.complete([t.request for t in tasks])
    for task, response in zip(tasks, responses, strict=True):
        dialogue = parse_dialogue(task, response, batch.generator)
        if isinstance(dialogue, Reject):
            rejects.append(dialogue)
            continue
        n, v = batch.validator.turns_to_keep(
            dialogue, n_sentences=task.article.n_sentences, allowed=task.offered
        )
        if n:
            rows += replace(dialogue, turns=dialogue.turns[:n], dialogue_id="").rows()
            kept += 1
        if n < len(dialogue.turns):  # the dropped turns (all of them, or those after a bad one)
            row = dialogue.as_json()
            detail = f"kept {n} of {len(dialogue.turns)} turns; {v.detail}"
            rejects.append(
                reject_of("dialogue", "dialogue", row, response.text, v.reason or "", detail)
            )
    return KindOutput(rows, rejects, {"dialogue": len(tasks)}, {"dialogues": kept})


DIALOGUE_GENERATOR = ItemGenerator(
    table="dialogue",
    prompts=("dialogue",),
    initial_tasks=lambda article, paragraphs, cfg: [
        dialogue_task(article, para, cfg) for para in paragraphs
    ],
    update_tasks=lambda article, cfg, _previous: [
        dialogue_task(article, para, cfg) for para in dialogue_paragraphs(article, cfg)
    ],
    run=run_dialogues,
    counts=lambda _table, parts: {"dialogues": sum(p["dialogues"] for p in parts)},
)
