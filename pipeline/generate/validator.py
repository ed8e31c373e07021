"""The item validator: the limits of a generation config and every item kind's checks.

:class:`ItemValidator` holds the limits (:meth:`ItemValidator.from_config`) and takes each
kind's checks from the kind's module: ``score_qa`` from :class:`pipeline.generate.qa.QAChecks`,
``score_dialogue`` / ``score_turns`` / ``turns_to_keep`` from
:class:`pipeline.generate.dialogue.DialogueChecks`, ``score_quadruple`` from
:class:`pipeline.generate.quadruples.QuadrupleChecks`. The checks every kind shares, the
:class:`~pipeline.generate.validate.Verdict` and the reject codes are in
:mod:`pipeline.generate.validate`.
"""

from __future__ import annotations

from pipeline.config import GenerationConfig
from pipeline.generate.dialogue import DialogueChecks
from pipeline.generate.qa import QAChecks
from pipeline.generate.quadruples import QuadrupleChecks
from pipeline.syntax import RelationParser
from pipeline.text_checks import TURN_MIN_SHARE


class ItemValidator(QAChecks, DialogueChecks, QuadrupleChecks):
    """Scores QA items, dialogues and quadruples against the evidence they cite."""

    def __init__(
        self,
        *,
        answer_max_words: int = 10,
        dialogue_min_turns: int = 3,
        dialogue_max_turns: int = 4,
        relation_max_words: int = 8,
        object_max_words: int = 8,
        turn_min_share: float = TURN_MIN_SHARE,
        question_min_share: float = 0.34,
        grammar: RelationParser | None = None,
        question_grammar: bool = False,
    ) -> None:
        self.answer_max_words = answer_max_words
        self.dialogue_min_turns = dialogue_min_turns
        self.dialogue_max_turns = dialogue_max_turns
        self.relation_max_words = relation_max_words
        self.object_max_words = object_max_words
        self.turn_min_share = turn_min_share
        self.question_min_share = question_min_share
        self.grammar = grammar
        self.question_grammar = question_grammar

    @classmethod
    def from_config(cls, cfg: GenerationConfig) -> ItemValidator:
        """A validator with the limits of a generation config."""
        return cls(
            answer_max_words=cfg.answer_max_words,
            dialogue_min_turns=cfg.dialogue_min_turns,
            dialogue_max_turns=cfg.dialogue_max_turns,
            grammar=RelationParser() if cfg.quadruple_grammar_check else None,
            question_grammar=cfg.qa_grammar_check,
        )
