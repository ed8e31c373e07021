"""Benchmark item generation: GrowOVER-QA, GrowOVER-Dialogue and Chronos-style quadruples.

- :mod:`pipeline.generate.prompts`: templates in ``prompts/``, content hashes, answer schemas.
- :mod:`pipeline.generate.selection`: which paragraphs / sentence groups feed each request.
- :mod:`pipeline.generate.kinds`: the contract of an item kind's generator.
- :mod:`pipeline.generate.qa`, :mod:`~pipeline.generate.dialogue`,
  :mod:`~pipeline.generate.quadruples`: each kind's generator and all of its own: its item
  record, answer models, requests, parsing, checks and duplicate key.
- :mod:`pipeline.generate.items`: what the kinds share: stable ids, rejects, the generated
  tables, the tolerant field parsers.
- :mod:`pipeline.generate.validate`: the checks the kinds share, the verdict, the reject codes;
  :mod:`pipeline.generate.validator`: the ``ItemValidator`` that holds the configured limits
  and scores every kind.
- :mod:`pipeline.generate.contradiction`: the LLM check of changed sentence pairs.
- :mod:`pipeline.generate.stage`: the stage that runs it all and writes
  ``<workdir>/generated/<snapshot>/``.

Importing the package imports every kind's module, so each has added its answer models to
:data:`pipeline.generate.prompts.ANSWER_MODELS` before any request is built.
"""

from pipeline.generate.contradiction import LLMContradictionChecker
from pipeline.generate.dialogue import Dialogue, DialogueTurn
from pipeline.generate.items import Reject, make_item_id
from pipeline.generate.kinds import ItemGenerator, generation_prompt_names, item_generators
from pipeline.generate.prompts import (
    PromptTemplate,
    answer_schema,
    load_prompt,
    prompt_hash,
    prompt_hashes,
)
from pipeline.generate.qa import QAItem
from pipeline.generate.quadruples import Quadruple, normalize_timestamp
from pipeline.generate.selection import (
    Article,
    ArticleParagraph,
    ChangedPair,
    NewGroup,
    changed_pairs,
    dialogue_paragraphs,
    group_new_sentences,
    is_informative,
    select_paragraphs,
)
from pipeline.generate.stage import generate_items
from pipeline.layout import generated_dir, read_generated, read_generation_summary
from pipeline.markers import GenerationSummary

__all__ = [
    "Article",
    "ArticleParagraph",
    "ChangedPair",
    "Dialogue",
    "DialogueTurn",
    "GenerationSummary",
    "ItemGenerator",
    "LLMContradictionChecker",
    "NewGroup",
    "PromptTemplate",
    "QAItem",
    "Quadruple",
    "Reject",
    "answer_schema",
    "changed_pairs",
    "dialogue_paragraphs",
    "generate_items",
    "generated_dir",
    "generation_prompt_names",
    "group_new_sentences",
    "is_informative",
    "item_generators",
    "load_prompt",
    "make_item_id",
    "normalize_timestamp",
    "prompt_hash",
    "prompt_hashes",
    "read_generated",
    "read_generation_summary",
    "select_paragraphs",
]
