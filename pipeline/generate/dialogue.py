"""GrowOVER-Dialogue requests and answer parsing.

One request per paragraph: the paragraph's sentences with their article-level index, the
article title as the topic, and the allowed number of turns. Each returned turn names the
one sentence its expert reply used; the turn's type is that sentence's label (``new`` for an
article generated from scratch, else unchanged / changed / new from the labeling stage).

Parsing never raises: an unusable answer becomes a :class:`Reject` with a reason code. A
dialogue whose turn fails a check is cut before that turn (later turns build on earlier
ones) and kept when the minimum number of turns remains; the dropped turns are a reject.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pipeline.config import GenerationConfig
from pipeline.generate.items import (
    Dialogue,
    DialogueTurn,
    FieldError,
    Reject,
    field_reject,
    field_value,
    index_field,
    response_reject,
    text_field,
)
from pipeline.generate.kinds import Batch, ItemGenerator, KindOutput, reject_of
from pipeline.generate.prompts import answer_schema, load_prompt, number_sentences
from pipeline.generate.selection import Article, ArticleParagraph, dialogue_paragraphs
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.text_checks import supporting_sentence


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
