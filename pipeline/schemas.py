"""Every table the pipeline writes: one Arrow schema per table and each stage's schema version
by name (the kinds of item a release holds: :mod:`pipeline.item_kinds`).

Stages, readers (:mod:`pipeline.layout`), exports and evaluation take their schemas from here,
so a table is defined once. A stage's schema version is stamped into
every Parquet file it writes (:func:`pipeline.storage.write_parquet_atomic`) and readers refuse
files newer than the version they know.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

# --------------------------------------------------------------------------- snapshots
SNAPSHOT_SCHEMA_VERSION = 1

ARTICLES_SCHEMA = pa.schema(
    [
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("revision_id", pa.int64()),
        ("revision_timestamp", pa.string()),
        ("snapshot", pa.string()),
        ("wikitext_sha1", pa.string()),
        ("n_paragraphs", pa.int32()),
        ("n_sentences", pa.int32()),
        ("text_version", pa.string()),
    ]
)
SENTENCES_SCHEMA = pa.schema(
    [
        ("page_id", pa.int64()),
        ("sent_idx", pa.int32()),
        ("para_idx", pa.int32()),
        ("section", pa.string()),
        ("text", pa.string()),
        ("text_hash", pa.string()),
    ]
)
REVISIONS_SCHEMA = pa.schema(
    [("page_id", pa.int64()), ("revision_id", pa.int64()), ("wikitext", pa.large_string())]
)
SNAPSHOT_TABLES: dict[str, pa.Schema] = {
    "articles": ARTICLES_SCHEMA,
    "sentences": SENTENCES_SCHEMA,
    "revisions": REVISIONS_SCHEMA,
}

# --------------------------------------------------------------------------- sentence labels
LABELS_SCHEMA_VERSION = 1
# The values of the ``label`` column.
UNCHANGED, CHANGED, NEW, DELETED, UNLABELED = "unchanged", "changed", "new", "deleted", "unlabeled"
LABELS = (UNCHANGED, CHANGED, NEW, DELETED, UNLABELED)

LABELS_SCHEMA = pa.schema(
    [
        ("page_id", pa.int64()),
        ("new_idx", pa.int32()),
        ("old_idx", pa.list_(pa.int32())),
        ("label", pa.string()),
        ("rule", pa.string()),
        ("decided_by", pa.string()),
        ("text", pa.string()),
        ("old_text", pa.string()),
        ("similarity", pa.float64()),
        ("nli_entailment", pa.float64()),
        ("nli_neutral", pa.float64()),
        ("nli_contradiction", pa.float64()),
        ("verified", pa.bool_()),
        ("reason", pa.string()),
    ]
)

# --------------------------------------------------------------------------- generated items
GENERATED_SCHEMA_VERSION = 1

GENERATED_QA_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("snapshot", pa.string()),
        ("type", pa.string()),
        ("origin", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("previous_answer", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("old_evidence_sent_idx", pa.list_(pa.int32())),
        ("old_evidence_text", pa.string()),
        ("previous_snapshot", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
        ("raw_output", pa.string()),
    ]
)
GENERATED_DIALOGUE_SCHEMA = pa.schema(
    [
        ("dialogue_id", pa.string()),
        ("turn_id", pa.string()),
        ("turn_idx", pa.int32()),
        ("n_turns", pa.int32()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("snapshot", pa.string()),
        ("para_idx", pa.int32()),
        ("user", pa.string()),
        ("expert", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("type", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)
GENERATED_QUADRUPLES_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("snapshot", pa.string()),
        ("subject", pa.string()),
        ("relation", pa.string()),
        ("object", pa.string()),
        ("timestamp", pa.string()),
        ("observed_at", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("type", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)
REJECTS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("page_id", pa.int64()),
        ("snapshot", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("purpose", pa.string()),
        ("item_json", pa.string()),
        ("raw_output", pa.string()),
        ("prompt_hash", pa.string()),
    ]
)
GENERATED_TABLES: dict[str, pa.Schema] = {
    "qa": GENERATED_QA_SCHEMA,
    "dialogue": GENERATED_DIALOGUE_SCHEMA,
    "quadruples": GENERATED_QUADRUPLES_SCHEMA,
    "rejects": REJECTS_SCHEMA,
}

# --------------------------------------------------------------------------- ledger
LEDGER_SCHEMA_VERSION = 1

LEDGER_ITEMS_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("kind", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("created_snapshot", pa.string()),
        ("valid_from", pa.string()),
        ("valid_to", pa.string()),
        ("retired_reason", pa.string()),
        ("type_at_creation", pa.string()),
        ("origin", pa.string()),
        # qa
        ("question", pa.string()),
        ("answer", pa.string()),
        ("previous_answer", pa.string()),
        # dialogue turns
        ("dialogue_id", pa.string()),
        ("turn_idx", pa.int32()),
        ("user", pa.string()),
        ("expert", pa.string()),
        # quadruples
        ("subject", pa.string()),
        ("relation", pa.string()),
        ("object", pa.string()),
        ("timestamp", pa.string()),
        ("observed_at", pa.string()),
        ("superseded_by", pa.string()),
        ("fact_valid_until", pa.string()),
        # provenance
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)
LEDGER_EVIDENCE_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("snapshot", pa.string()),
        ("page_id", pa.int64()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("type", pa.string()),
    ]
)

# --------------------------------------------------------------------------- temporal questions
TEMPORAL_SCHEMA_VERSION = 1

TEMPORAL_QUESTIONS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("category", pa.string()),
        ("shape", pa.string()),
        ("quadruple_ids", pa.list_(pa.string())),
        ("answer", pa.list_(pa.string())),
        ("answer_mode", pa.string()),
        ("as_of", pa.string()),
        ("question", pa.string()),
        ("status", pa.string()),  # kept | rejected
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("created_snapshot", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)

# --------------------------------------------------------------------------- releases
# v2: the temporal tables (temporal_qa, timelines, relations); v1 releases have none.
# v3: sources.parquet (the article revisions the release quotes, for attribution) and, on
# every row, the revision its evidence comes from (``revision_id``) and ledger items'
# ``first_release``; the columns are appended, so a v2 reader's columns keep their order.
RELEASE_SCHEMA_VERSION = 3

# The columns a release schema version added to a table of an earlier one (a release of an
# older version is read, verified and exported without them).
_REVISION = ("revision_id", pa.int64())
_FIRST_RELEASE = ("first_release", pa.string())

RELEASE_QA_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("type", pa.string()),
        ("type_at_creation", pa.string()),
        ("created_snapshot", pa.string()),
        ("origin", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("previous_answer", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
        _REVISION,
        _FIRST_RELEASE,
    ]
)
RELEASE_DIALOGUE_SCHEMA = pa.schema(
    [
        ("dialogue_id", pa.string()),
        ("turn_id", pa.string()),
        ("turn_idx", pa.int32()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("created_snapshot", pa.string()),
        ("user", pa.string()),
        ("expert", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("evidence_snapshot", pa.string()),
        ("type", pa.string()),
        ("type_at_creation", pa.string()),
        ("evaluate", pa.bool_()),
        ("excluded_reason", pa.string()),
        ("excluded_at", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
        _REVISION,
        _FIRST_RELEASE,
    ]
)
RELEASE_QUADRUPLES_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("subject", pa.string()),
        ("relation", pa.string()),
        ("object", pa.string()),
        ("timestamp", pa.string()),
        ("observed_at", pa.string()),
        ("status", pa.string()),
        ("superseded_by", pa.string()),
        ("fact_valid_until", pa.string()),
        ("type", pa.string()),
        ("type_at_creation", pa.string()),
        ("created_snapshot", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("evidence_snapshot", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
        _REVISION,
        _FIRST_RELEASE,
    ]
)
RETIRED_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("kind", pa.string()),
        ("page_id", pa.int64()),
        ("reason", pa.string()),
        ("superseded_by", pa.string()),
    ]
)
TEMPORAL_QA_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("category", pa.string()),
        ("shape", pa.string()),
        ("question", pa.string()),
        ("answer", pa.list_(pa.string())),
        ("answer_mode", pa.string()),
        ("as_of", pa.string()),
        ("valid_from", pa.string()),
        ("valid_to", pa.string()),
        ("quadruple_ids", pa.list_(pa.string())),
        ("page_ids", pa.list_(pa.int64())),
        ("titles", pa.list_(pa.string())),
        ("evidence_text", pa.list_(pa.string())),
        ("type", pa.string()),
        ("created_snapshot", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
        ("revision_ids", pa.list_(pa.int64())),  # one per quadruple
    ]
)
TIMELINES_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("source", pa.string()),  # qa_chain | fact_chain
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("interval_idx", pa.int32()),
        ("interval_start", pa.string()),
        ("interval_end", pa.string()),  # null: still open at this release
        ("answer", pa.string()),
        ("evidence_id", pa.string()),
        ("evidence_text", pa.string()),
        _REVISION,
    ]
)
RELATIONS_SCHEMA = pa.schema(
    [
        ("relation_id", pa.string()),
        ("type", pa.string()),  # updates | contradicts | supports
        ("rule", pa.string()),
        ("source_kind", pa.string()),  # sentence | quadruple
        ("source_id", pa.string()),
        ("source_snapshot", pa.string()),
        ("source_time", pa.string()),
        ("source_text", pa.string()),
        ("target_kind", pa.string()),
        ("target_id", pa.string()),
        ("target_snapshot", pa.string()),
        ("target_time", pa.string()),
        ("target_text", pa.string()),
        ("page_id", pa.int64()),
        ("observed_at", pa.string()),
        ("source_revision_id", pa.int64()),
        ("target_revision_id", pa.int64()),
    ]
)
SOURCES_SCHEMA = pa.schema(
    [
        ("page_id", pa.int64()),
        ("title", pa.string()),  # the article's title at that revision
        ("revision_id", pa.int64()),
        ("revision_timestamp", pa.string()),
        ("url", pa.string()),  # https://<wiki>/w/index.php?oldid=<revision_id>
        ("license", pa.string()),
    ]
)
# Wikipedia's text licence, stated on every row of ``sources.parquet``.
WIKIPEDIA_LICENSE = "CC BY-SA 4.0"


_ITEM_COLUMNS_V3 = ((3, ("revision_id", "first_release")),)


@dataclass(frozen=True)
class ReleaseTable:
    """One Parquet file of a release."""

    name: str  # file stem and Hugging Face config name
    schema: pa.Schema
    since: int  # the first release schema version that has it
    description: str  # one line for the dataset card of the Hugging Face export
    exported: bool = True  # a config of the Hugging Face export
    # (schema version, columns it appended), for columns added after ``since``
    added: tuple[tuple[int, tuple[str, ...]], ...] = ()

    @property
    def stored_name(self) -> str:
        """The table name stamped into the file (the labels keep their stage's name)."""
        return self.name if self.name == "sentence_labels" else f"release_{self.name}"

    def schema_at(self, schema_version: int) -> pa.Schema:
        """The table's columns in a release of ``schema_version`` (without those a later
        version added)."""
        later = {c for v, cols in self.added if v > schema_version for c in cols}
        return pa.schema([f for f in self.schema if f.name not in later])


RELEASE_TABLES: dict[str, ReleaseTable] = {
    t.name: t
    for t in (
        ReleaseTable(
            "qa",
            RELEASE_QA_SCHEMA,
            1,
            "Question-answer pairs with evidence sentences, typed unchanged / new / changed.",
            added=_ITEM_COLUMNS_V3,
        ),
        ReleaseTable(
            "dialogue",
            RELEASE_DIALOGUE_SCHEMA,
            1,
            "User-expert dialogue turns (one row per turn) with their evidence sentence.",
            added=_ITEM_COLUMNS_V3,
        ),
        ReleaseTable(
            "quadruples",
            RELEASE_QUADRUPLES_SCHEMA,
            1,
            "Time-stamped knowledge quadruples (subject, relation, object, timestamp).",
            added=_ITEM_COLUMNS_V3,
        ),
        ReleaseTable(
            "sentence_labels",
            LABELS_SCHEMA,
            1,
            "Sentence labels (unchanged / changed / new / deleted / unlabeled).",
        ),
        ReleaseTable(
            "retired", RETIRED_SCHEMA, 1, "Items that left at this release.", exported=False
        ),
        ReleaseTable(
            "temporal_qa",
            TEMPORAL_QA_SCHEMA,
            2,
            "Chronos-style C1 / C2 / C3 questions over the time-stamped quadruples.",
            added=((3, ("revision_ids",)),),
        ),
        ReleaseTable(
            "timelines",
            TIMELINES_SCHEMA,
            2,
            "Questions re-asked at every release, one row per interval with its answer.",
            added=((3, ("revision_id",)),),
        ),
        ReleaseTable(
            "relations",
            RELATIONS_SCHEMA,
            2,
            "Edges between facts: updates, contradicts, supports.",
            added=((3, ("source_revision_id", "target_revision_id")),),
        ),
        ReleaseTable(
            "sources",
            SOURCES_SCHEMA,
            3,
            "The Wikipedia article revisions the release quotes (oldid URL, licence): attribution.",
        ),
    )
}


def release_files(schema_version: int) -> tuple[str, ...]:
    """The data files (stems) a release of ``schema_version`` holds, in their fixed order."""
    return tuple(t.name for t in RELEASE_TABLES.values() if t.since <= schema_version)


def export_configs(schema_version: int) -> tuple[str, ...]:
    """The Hugging Face configs of an export of a release of ``schema_version``."""
    return tuple(
        t.name for t in RELEASE_TABLES.values() if t.since <= schema_version and t.exported
    )
