"""What text each generation request is made from.

- **Informative paragraphs** (GrowOVER §3.1): fewer than five sentences
  (``paragraph_max_sentences`` = 4) and 300-600 characters of joined text.
- **Initial selection**: when more than ``paragraphs_per_article`` (4) paragraphs qualify, their
  embeddings are clustered with K-Means into 4 clusters and one paragraph is drawn from each
  cluster with a random generator seeded by (seed, page_id), so a run is reproducible and two
  articles do not share the same draw pattern.
- **New-sentence groups** (§3.3): runs of ``new`` sentences with adjacent indices *in the same
  paragraph*. A paragraph break is where Wikipedia changes sub-topic, so a question drawn from
  sentences across it would mix topics, and the group's paragraph is then exactly its source
  context. Runs longer than ``new_group_max_sentences`` (6) are cut into chunks of at most 6.
- **Changed pairs**: each ``changed`` sentence with the old sentence it replaces.
- **Dialogue paragraphs at later snapshots**: informative paragraphs holding at least one
  changed / new sentence and no ``unlabeled`` sentence (a turn's type is read from its
  evidence sentence's label, which an unlabeled sentence does not have). No cap on how many:
  GrowOVER Algorithm 5 takes every such paragraph.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.config import GenerationConfig
from pipeline.models.embedder import Embedder
from pipeline.text_checks import normalize_answer

CHANGED, NEW, UNCHANGED, UNLABELED = "changed", "new", "unchanged", "unlabeled"


@dataclass(frozen=True)
class ArticleParagraph:
    """The sentences of one paragraph of one article, in document order."""

    page_id: int
    para_idx: int
    section: str
    sent_idx: tuple[int, ...]
    texts: tuple[str, ...]

    @property
    def text(self) -> str:
        """The sentences joined by a space (what the length criteria measure)."""
        return " ".join(self.texts)


@dataclass(frozen=True)
class NewGroup:
    """Consecutive new sentences of one paragraph (at most ``new_group_max_sentences``)."""

    page_id: int
    para_idx: int
    sent_idx: tuple[int, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class ChangedPair:
    """A changed sentence of the new snapshot and the old-snapshot sentence it replaces."""

    page_id: int
    para_idx: int
    new_idx: int
    new_text: str
    old_idx: int
    old_text: str


@dataclass
class Article:
    """One article in one snapshot, with the labels of its sentences against the previous
    snapshot (``initial`` and no labels for an article generated from scratch)."""

    page_id: int
    title: str
    snapshot: str
    texts: list[str]
    para_of: list[int]
    section_of: list[str]
    labels: dict[int, str] = field(default_factory=dict)
    old_of: dict[int, tuple[int, str]] = field(default_factory=dict)  # changed idx -> old
    initial: bool = True  # generated from scratch: every sentence counts as new

    @property
    def n_sentences(self) -> int:
        """How many sentences the article has in this snapshot."""
        return len(self.texts)

    def paragraphs(self) -> list[ArticleParagraph]:
        """The article's paragraphs in document order."""
        out: list[ArticleParagraph] = []
        idx: list[int] = []
        for i, para in enumerate(self.para_of):
            if idx and self.para_of[idx[-1]] != para:
                out.append(self._paragraph(idx))
                idx = []
            idx.append(i)
        if idx:
            out.append(self._paragraph(idx))
        return out

    def _paragraph(self, idx: list[int]) -> ArticleParagraph:
        return ArticleParagraph(
            page_id=self.page_id,
            para_idx=self.para_of[idx[0]],
            section=self.section_of[idx[0]],
            sent_idx=tuple(idx),
            texts=tuple(self.texts[i] for i in idx),
        )

    def evidence_text(self, indices: Iterable[int]) -> str:
        """The given sentences joined by a space (indices must be in range)."""
        return " ".join(self.texts[i] for i in indices)

    def label_of(self, idx: int) -> str:
        """The sentence's label; every sentence of a from-scratch article counts as new."""
        return NEW if self.initial else self.labels.get(idx, UNLABELED)


def is_informative(paragraph: ArticleParagraph, cfg: GenerationConfig) -> bool:
    """GrowOVER's paragraph criteria: few sentences and a moderate length."""
    n_chars = len(paragraph.text)
    return (
        0 < len(paragraph.sent_idx) <= cfg.paragraph_max_sentences
        and cfg.paragraph_min_chars <= n_chars <= cfg.paragraph_max_chars
    )


def informative_paragraphs(article: Article, cfg: GenerationConfig) -> list[ArticleParagraph]:
    """The article's paragraphs that pass :func:`is_informative`."""
    return [p for p in article.paragraphs() if is_informative(p, cfg)]


def pick_per_cluster(
    candidates: Sequence[ArticleParagraph], vectors: np.ndarray, cfg: GenerationConfig
) -> list[ArticleParagraph]:
    """K-Means over the candidates' vectors, one seeded-random paragraph per cluster; the
    picks are returned in document order."""
    k = cfg.paragraphs_per_article
    if len(candidates) <= k:
        return list(candidates)
    from sklearn.cluster import KMeans  # scikit-learn import is slow: only when clustering

    with warnings.catch_warnings():
        # Identical paragraphs give fewer distinct points than clusters; a warning, not an error.
        warnings.simplefilter("ignore")
        labels = KMeans(n_clusters=k, n_init=10, random_state=cfg.seed).fit_predict(
            np.asarray(vectors, dtype=np.float64)
        )
    rng = np.random.default_rng([cfg.seed, candidates[0].page_id])
    picks = []
    for cluster in range(k):
        members = np.flatnonzero(labels == cluster)
        if len(members):
            picks.append(candidates[int(members[rng.integers(len(members))])])
    return sorted(picks, key=lambda p: p.para_idx)


def select_paragraphs(
    articles: Sequence[Article], embedder: Embedder, cfg: GenerationConfig
) -> dict[int, list[ArticleParagraph]]:
    """Initial-generation paragraphs of each article (page_id -> picks). All candidate
    paragraphs that need clustering are embedded in one call."""
    candidates = {a.page_id: informative_paragraphs(a, cfg) for a in articles}
    to_embed = [p for ps in candidates.values() if len(ps) > cfg.paragraphs_per_article for p in ps]
    vectors = embedder.embed([p.text for p in to_embed]) if to_embed else np.zeros((0, 1))
    row = {(p.page_id, p.para_idx): i for i, p in enumerate(to_embed)}
    out: dict[int, list[ArticleParagraph]] = {}
    for page_id, ps in candidates.items():
        if len(ps) > cfg.paragraphs_per_article:
            vecs = vectors[[row[(p.page_id, p.para_idx)] for p in ps]]
            out[page_id] = pick_per_cluster(ps, vecs, cfg)
        else:
            out[page_id] = list(ps)
    return out


_MIN_STATEMENT_WORDS = 5
# A statement ends like a sentence; a heading ("Economic impact on Danish society") or a list's
# lead-in ("... won the title for Mercedes:") does not.
_SENTENCE_END = frozenset(".!?\"')]\u201d\u2019")


def is_statement(text: str) -> bool:
    """A sentence that states something on its own: not a list's lead-in ("The following
    drivers won ...:"), not a heading, not a table footnote ("* Season still in progress."),
    not a fragment of a few words. Items made from the others ask about nothing."""
    stripped = text.strip()
    return (
        len(stripped.split()) >= _MIN_STATEMENT_WORDS
        and stripped[-1] in _SENTENCE_END
        and not stripped.startswith(("*", "•", "†", "‡", "^", "#"))
    )


def group_new_sentences(article: Article, max_sentences: int) -> list[NewGroup]:
    """Runs of adjacent ``new`` statements (:func:`is_statement`) within one paragraph, cut
    into chunks of at most ``max_sentences`` (a run of 13 with max 6 gives 6 + 6 + 1)."""
    runs: list[list[int]] = []
    for i in range(article.n_sentences):
        if article.labels.get(i) != NEW or not is_statement(article.texts[i]):
            continue
        if runs and runs[-1][-1] == i - 1 and article.para_of[i - 1] == article.para_of[i]:
            runs[-1].append(i)
        else:
            runs.append([i])
    groups = []
    for run in runs:
        for start in range(0, len(run), max_sentences):
            chunk = run[start : start + max_sentences]
            groups.append(
                NewGroup(
                    page_id=article.page_id,
                    para_idx=article.para_of[chunk[0]],
                    sent_idx=tuple(chunk),
                    texts=tuple(article.texts[i] for i in chunk),
                )
            )
    return groups


_NAME = re.compile(r"(?<=\S )[A-Z][\w'-]*")


def _fact_tokens(text: str) -> set[str]:
    """Numbers and capitalized words (not the first word) of a sentence, normalized."""
    names = " ".join(_NAME.findall(text))
    numbers = [t for t in normalize_answer(text).split() if any(c.isdigit() for c in t)]
    return set(normalize_answer(names).split()) | set(numbers)


def is_elaboration(old: str, new: str) -> bool:
    """True when the new sentence keeps every number and name of the old one ("born 1962" ->
    "born November 23, 1962", "Alonso" -> "Alonso and Stroll"): it adds detail but replaces
    nothing, so no question has an earlier and a different current answer."""
    new_tokens = set(normalize_answer(new).split())
    return _fact_tokens(old) <= new_tokens


def changed_pairs(article: Article) -> list[ChangedPair]:
    """Every changed statement with its old counterpart, in document order, except
    elaborations (:func:`is_elaboration`), which hold no replaced fact to ask about."""
    pairs = []
    for i in range(article.n_sentences):
        if (
            article.labels.get(i) == CHANGED
            and i in article.old_of
            and is_statement(article.texts[i])
            and not is_elaboration(article.old_of[i][1], article.texts[i])
        ):
            old_idx, old_text = article.old_of[i]
            pairs.append(
                ChangedPair(
                    page_id=article.page_id,
                    para_idx=article.para_of[i],
                    new_idx=i,
                    new_text=article.texts[i],
                    old_idx=old_idx,
                    old_text=old_text,
                )
            )
    return pairs


def dialogue_paragraphs(article: Article, cfg: GenerationConfig) -> list[ArticleParagraph]:
    """Informative paragraphs with a changed or new sentence and no unlabeled one."""
    out = []
    for p in informative_paragraphs(article, cfg):
        labels = [article.labels.get(i, UNLABELED) for i in p.sent_idx]
        if any(lab in (CHANGED, NEW) for lab in labels) and UNLABELED not in labels:
            out.append(p)
    return out


def source_context(article: Article, para_idx: int, cover: Sequence[int], max_chars: int) -> str:
    """Background for new / changed QA: the paragraph around ``cover``; when ``cover`` is the
    whole paragraph (nothing around it), the neighbouring paragraphs of the same section too,
    each only if it fits. At most ``max_chars`` (the own paragraph is cut at a sentence end)."""
    if max_chars <= 0:
        return ""
    paragraphs = article.paragraphs()
    pos = next(i for i, p in enumerate(paragraphs) if p.para_idx == para_idx)
    own = paragraphs[pos]
    kept: list[str] = []
    for text in own.texts:
        if kept and len(" ".join([*kept, text])) > max_chars:
            break
        kept.append(text)
    context = " ".join(kept)
    if set(own.sent_idx) <= set(cover):
        for neighbour in (pos - 1, pos + 1):
            if 0 <= neighbour < len(paragraphs) and paragraphs[neighbour].section == own.section:
                extra = paragraphs[neighbour].text
                if len(context) + 1 + len(extra) <= max_chars:
                    context = f"{extra} {context}" if neighbour < pos else f"{context} {extra}"
    return context
