"""A scripted LLM for tests: answers GrowOVER/wikidrift generation prompts from the request.

It reads the numbered sentences of the prompt, cites one of them and copies an entity (a
year, a capitalized name) into the answer, so a correct pipeline keeps its items.
``FaultyResponder`` swaps chosen requests for bad answers, one per rejection reason.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from pipeline.fact_keys import normalize_key
from pipeline.models.llm.base import LLMRequest

_SENTENCE = re.compile(r"^\[(\d+)\] (.+)$", re.MULTILINE)
_TITLE = re.compile(r"^(?:Article title|Topic): (.+)$", re.MULTILINE)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(
    rf"\b(?:\d{{1,2}} (?:{_MONTHS}) \d{{4}}"
    rf"|(?:{_MONTHS}) \d{{1,2}},? \d{{4}}"
    rf"|(?:{_MONTHS}) \d{{4}})\b"
)
_NAME = re.compile(r"(?<!^)(?<![.!?] )\b([A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)*)")


# ---- reading a request ---------------------------------------------------------------------


REAL_INPUT = "Now the real input."


def user_text(request: LLMRequest) -> str:
    """The user message of a request, from the real input on (the worked example before it
    has sentences and titles of its own)."""
    text = next(m["content"] for m in request.messages if m["role"] == "user")
    return text.rpartition(REAL_INPUT)[2]


def numbered(request: LLMRequest) -> list[tuple[int, str]]:
    """The ``[index] sentence`` lines of a request."""
    sentences = user_text(request).partition("Candidate answers:")[0]
    return [(int(i), t) for i, t in _SENTENCE.findall(sentences)]


def title_of(request: LLMRequest) -> str:
    """The article title a request names."""
    m = _TITLE.search(user_text(request))
    return m.group(1).strip() if m else ""


def line_after(request: LLMRequest, prefix: str) -> str:
    """The rest of the line starting with ``prefix``."""
    m = re.search(rf"^{re.escape(prefix)}\s*(.+)$", user_text(request), re.MULTILINE)
    return m.group(1).strip() if m else ""


_CANDIDATE_LINE = re.compile(r"^\[(\d+)\] (\".+)$", re.MULTILINE)


def candidates(request: LLMRequest) -> list[tuple[int, str]]:
    """The candidate answers a QA request offers, as (sentence index, text)."""
    text = user_text(request).partition("Candidate answers:")[2]
    return [
        (int(i), value)
        for i, line in _CANDIDATE_LINE.findall(text)
        for value in re.findall(r'"([^"]+)"', line)
    ]


def cloze(title: str, sentence: str, answer: str) -> str:
    """A question made of ``sentence`` with ``answer`` replaced by "what", after the title:
    every word of it is the sentence's, so it asks about the answer's own fact."""
    # the whole words around the answer go ("1982–83" when the answer is 1982)
    asked = re.sub(rf"\S*{re.escape(answer)}\S*", "what", sentence.rstrip("."), count=1)
    return f"{title}: {asked}?"[:240]


def entity(sentence: str, title: str) -> str | None:
    """A short span of ``sentence`` that is not part of the title: a year or a name."""
    years = _YEAR.findall(sentence)
    if years:
        return years[-1]
    title_words = set(title.lower().split())
    for name in _NAME.findall(sentence):
        if not set(name.lower().split()) & title_words and len(name.split()) <= 4:
            return name
    words = [w for w in _words(sentence) if w.lower() not in title_words]
    return max(words, key=len) if words else None


def _object_of(sentence: str, title: str) -> str | None:
    """A name of ``sentence`` outside the title that is not a date: a quadruple's object."""
    title_words = set(title.lower().split())
    for name in _NAME.findall(sentence):
        words = name.split()
        months = _MONTHS.split("|")
        outside_title = not set(name.lower().split()) & title_words
        if outside_title and len(words) <= 4 and not any(w in months for w in words):
            return name
    words = [w for w in _words(sentence) if w.lower() not in title_words and not _YEAR.search(w)]
    return max(words, key=len) if words else None


def _two_names(sentence: str, title: str) -> tuple[str, str] | None:
    """The first two different names of ``sentence`` outside the title (not months)."""
    title_words = set(title.lower().split())
    months = _MONTHS.split("|")
    names = [
        n
        for n in dict.fromkeys(_NAME.findall(sentence))
        if not set(n.lower().split()) & title_words
        and len(n.split()) <= 4
        and not any(w in months for w in n.split())
    ]
    return (names[0], names[1]) if len(names) >= 2 else None


def _words(text: str) -> list[str]:
    stripped = (
        w.strip(".,;:()\"'").removesuffix("'s").removesuffix("\u2019s") for w in text.split()
    )
    return [w for w in stripped if len(w) > 2]


def _differing(a: str, b: str, title: str) -> str:
    """A word of ``a`` that ``b`` lacks (not from the title), preferring numbers and names."""
    title_words = set(title.lower().split())
    b_words = set(_words(b))
    candidates = [w for w in _words(a) if w not in b_words and w.lower() not in title_words]
    ranked = sorted(candidates, key=lambda w: (not w[0].isdigit(), not w[0].isupper()))
    if ranked:
        return ranked[0]
    return next((w for w in _words(a) if w.lower() not in title_words), _words(a)[0])


def _shared_word(a: str, b: str, title: str) -> str:
    """The longest word (not from the title) that ``a`` and ``b`` both have."""
    title_words = set(title.lower().split())
    shared = [w for w in _words(a) if w in set(_words(b)) and w.lower() not in title_words]
    return max(shared, key=len) if shared else ""


def _tag(text: str) -> str:
    return format(zlib.crc32(text.encode()) & 0xFFFF, "04x")


# ---- good answers --------------------------------------------------------------------------


def good_answer(request: LLMRequest) -> str:
    """A correct answer for any of the generation / contradiction / temporal prompts."""
    if request.purpose == "qa_retry":  # a second try: the first prompt answered well
        return good_answer(replace(request, purpose=request.schema_name))
    if request.purpose == "temporal_question":
        return json.dumps({"question": _temporal_question(request)})
    title = title_of(request)
    sents = numbered(request)
    if request.purpose in ("qa_initial", "qa_new"):
        # the first offered candidate answer, asked for with its own sentence's words
        i, answer = candidates(request)[0]
        return json.dumps({"answer": answer, "question": cloze(title, dict(sents)[i], answer)})
    if request.purpose == "qa_changed":
        new = line_after(request, "CURRENT:")
        return json.dumps({"question": cloze(title, new, line_after(request, "ANSWER:"))})
    if request.purpose == "update_check":
        # the words of NEW that OLD lacks: where the marked value was replaced, if it was
        old, new = line_after(request, "OLD:"), line_after(request, "NEW:")
        old_words = set(_words(old.replace("[[", " ").replace("]]", " ")))
        fresh = [w for w in _words(new) if w not in old_words]
        return json.dumps({"span": fresh[0] if fresh else "NONE"})
    if request.purpose == "qa_check":
        # The whole sentence holds whatever the pair's grounded answer is.
        return json.dumps({"answer": line_after(request, "Sentence:")})
    if request.purpose == "dialogue":
        idx = [i for i, _ in sents]
        uses = [idx[k % len(idx)] for k in range(3)]
        turns = []
        for k, i in enumerate(uses):
            # A sentence used n times gives each turn its own n-th of its words: no reply
            # says only what an earlier one said.
            words = dict(sents)[i].split()
            n, j = uses.count(i), uses[:k].count(i)
            part = words[j * len(words) // n : (j + 1) * len(words) // n]
            turns.append(
                {
                    "user": (
                        f"Tell me about {title}.",
                        f"What else about {title}?",
                        f"And then, for {title}?",
                    )[k],
                    "expert": " ".join(part).rstrip(".,;:") + ".",
                    "sentence": i,
                }
            )
        return json.dumps({"turns": turns})
    if request.purpose == "quadruples":
        quads = []
        for i, t in sents:
            dates = _DATE.findall(t)
            years = _YEAR.findall(t)
            name = _object_of(t, title)
            if name is None:
                continue
            pair = _two_names(t, title)
            if pair and (dates or years):
                # a fact between two other entities: C3 questions join facts through them
                quads.append(
                    {
                        "subject": pair[0],
                        "relation": "appeared with",
                        "object": pair[1],
                        "timestamp": (dates or years)[0],
                        "sentence": i,
                    }
                )
            if dates:
                quads.append(
                    {
                        "subject": title,
                        "relation": "dated event with",
                        "object": name,
                        "timestamp": dates[0],
                        "sentence": i,
                    }
                )
            elif years:
                quads.append(
                    {
                        "subject": title,
                        "relation": "event in year with",
                        "object": name,
                        "timestamp": years[0],
                        "sentence": str(i),
                    }
                )
            else:
                quads.append(
                    {"subject": title, "relation": "related to", "object": name, "sentence": i}
                )
        return "Here are the facts:\n```json\n" + json.dumps({"quadruples": quads}) + "\n```"
    if request.purpose == "contradiction":
        old = line_after(request, "OLDER:")
        new = line_after(request, "NEWER:")
        differs = _YEAR.findall(old) != _YEAR.findall(new)
        return json.dumps({"contradicts": differs, "reason": "years differ" if differs else "same"})
    raise AssertionError(f"unexpected purpose {request.purpose}")


def _temporal_input(request: LLMRequest) -> tuple[list[list[str]], str, str]:
    """(facts as [subject, relation, object, when], answer, time) of a temporal request."""
    real = user_text(request)
    facts = [
        [p.strip() for p in line.split(". ", 1)[1].split("|")]
        for line in real.splitlines()
        if re.match(r"^\d+\. ", line)
    ]
    answer = re.search(r"^ANSWER: (.*)$", real, re.MULTILINE).group(1)  # type: ignore[union-attr]
    time = re.search(r"^TIME: (.*)$", real, re.MULTILINE).group(1)  # type: ignore[union-attr]
    return facts, answer, time


def _temporal_question(request: LLMRequest) -> str:
    facts, _, time = _temporal_input(request)
    (s1, r1, o1, _), *rest = facts
    if time == "now":
        return f"What does {s1} {r1} now?"
    if rest and "links" in line_after(request, "KIND:"):
        s2, r2, o2, _ = rest[0]
        if normalize_key(o1) == normalize_key(s2):  # bridge: name the two outer entities
            return f"Which entity that {s1} {r1} also {r2} {o2}, {time}?"
        return f"Which entity did both {s1} and {s2} relate to, {time}?"
    if rest:
        return f"Which values did {s1} have for {r1} {time}?"
    return f"Which value did {s1} have for {r1} {time}?"


# ---- bad answers ---------------------------------------------------------------------------


def _qa_fault(kind: str, request: LLMRequest) -> str:
    good = json.loads(good_answer(request))
    sents = numbered(request)
    if kind == "prose":
        return "I believe the answer is the company founded in 1990."
    if kind == "llm_error":
        raise RuntimeError("scripted outage")
    if kind == "missing_field":
        return json.dumps({"question": good["question"]})
    if kind == "wrong_type":
        return json.dumps(good | {"answer": {"name": good["answer"]}})
    if kind == "leaning":
        return json.dumps(good | {"question": "According to the passage, what is described?"})
    if kind == "long":
        longest = max((t for _, t in sents), key=len)
        return json.dumps(good | {"answer": f"{longest} {longest}"})
    if kind == "ungrounded":
        return json.dumps(good | {"answer": "Zanzibar Quokka Consortium"})
    if kind == "yes_no":
        return json.dumps(good | {"answer": "Yes"})
    if kind == "in_question":
        return json.dumps(
            good | {"question": f"Is {good['answer']} the answer about {title_of(request)}?"}
        )
    if kind == "empty":
        return json.dumps(good | {"question": "  "})
    if kind == "off_topic":
        return json.dumps(good | {"question": "What is the capital of Zanzibar?"})
    if kind == "giveaway":
        question = f"Which detail of {title_of(request)}: Zanzibar or {good['answer']}?"
        return json.dumps(good | {"question": question, "answer": f"{good['answer']} Zanzibar"})
    if kind == "url":
        return json.dumps(good | {"answer": "http://zanzibar.example"})
    if kind == "dangling":
        return json.dumps(good | {"question": f"When did he do this for {title_of(request)}?"})
    if kind == "garbled":
        return json.dumps(good | {"question": good["question"].rstrip("?") + " 肝?"})
    raise AssertionError(kind)


def _changed_fault(kind: str, request: LLMRequest) -> str:
    good = json.loads(good_answer(request))
    if kind == "changed_in_question":
        question = f"{good['question']} Was it {line_after(request, 'ANSWER:')}?"
        return json.dumps({"question": question})
    if kind == "changed_unstated":  # a premise no sentence states
        return json.dumps(
            {"question": good["question"].rstrip("?") + " after the Zanzibar merger?"}
        )
    raise AssertionError(kind)


def _check_fault(kind: str, request: LLMRequest) -> str:
    if kind == "mismatch":
        return json.dumps({"answer": "none"})
    raise AssertionError(kind)


def _dialogue_fault(kind: str, request: LLMRequest) -> str:
    good = json.loads(good_answer(request))
    if kind == "two_turns":
        return json.dumps({"turns": good["turns"][:2]})
    if kind == "empty_expert":
        good["turns"][1]["expert"] = ""
        return json.dumps(good)
    if kind == "leaning":
        good["turns"][2]["expert"] = "As mentioned above, " + good["turns"][2]["expert"]
        return json.dumps(good)
    if kind == "not_a_list":
        return json.dumps({"turns": "user asks, expert answers"})
    if kind == "ungrounded_turn":
        good["turns"][0]["expert"] += " It happened in 1850."
        return json.dumps(good)
    if kind == "repeat":
        good["turns"][2] = good["turns"][0] | {"user": "Could you say that again?"}
        return json.dumps(good)
    if kind == "cut_reply":  # stopped mid-phrase
        good["turns"][0]["expert"] = good["turns"][0]["expert"].rstrip(".") + " and"
        return json.dumps(good)
    if kind == "adds_claims":  # grounded enough by word share, but it says more
        good["turns"][0]["expert"] += " Critics called it a remarkable triumph."
        return json.dumps(good)
    if kind == "out_of_range":
        good["turns"][1]["sentence"] = 9999
        return json.dumps(good)
    if kind == "outside_input":
        first = numbered(request)[0][0]
        good["turns"][1]["sentence"] = first - 1 if first > 0 else numbered(request)[-1][0] + 1
        return json.dumps(good)
    raise AssertionError(kind)


def _quadruple_fault(kind: str, request: LLMRequest) -> str:
    i, text = numbered(request)[0]
    base = {"subject": title_of(request), "relation": "related to", "sentence": i}
    obj = _object_of(text, title_of(request)) or text.split()[0]
    if kind == "bad_timestamp":
        quads = [base | {"object": obj, "timestamp": "sometime soon"}]
    elif kind == "timestamp_not_in_evidence":
        quads = [base | {"object": obj, "timestamp": "1850"}]
    elif kind == "ungrounded":
        quads = [base | {"subject": "Zanzibar", "object": "Quokka", "timestamp": None}]
    elif kind == "duplicate":
        quads = [base | {"object": obj, "timestamp": None}] * 2
    elif kind == "missing_relation":
        quads = [{"subject": base["subject"], "object": obj, "timestamp": None, "sentence": i}]
    elif kind == "long_relation":
        relation = "is related in a very long and detailed way to"
        quads = [base | {"relation": relation, "object": obj, "timestamp": None}]
    elif kind == "same_entity":
        quads = [base | {"object": base["subject"], "timestamp": None}]
    elif kind == "clause_object":
        quads = [
            base
            | {"object": f"{obj} and everything that happened to it after that", "timestamp": None}
        ]
    elif kind == "date_object":
        quads = [base | {"object": "12 May 1999", "timestamp": None}]
    elif kind == "cut_off":
        quads = [base | {"relation": "related to (its", "object": obj, "timestamp": None}]
    elif kind == "pronoun":
        quads = [base | {"subject": "the company", "object": obj, "timestamp": None}]
    else:
        raise AssertionError(kind)
    return json.dumps({"quadruples": quads})


QA_FAULTS = [
    "prose",
    "llm_error",
    "missing_field",
    "wrong_type",
    "leaning",
    "long",
    "ungrounded",
    "yes_no",
    "in_question",
    "empty",
]
NEW_QA_FAULTS = ["off_topic", "giveaway", "url", "garbled", "dangling"]
CHECK_FAULTS = ["mismatch"]
CHANGED_FAULTS = ["changed_in_question", "changed_unstated"]
DIALOGUE_FAULTS = [
    "two_turns",
    "empty_expert",
    "leaning",
    "not_a_list",
    "ungrounded_turn",
    "repeat",
    "cut_reply",
    "adds_claims",
    "out_of_range",
    "outside_input",
]
QUADRUPLE_FAULTS = [
    "bad_timestamp",
    "timestamp_not_in_evidence",
    "ungrounded",
    "duplicate",
    "missing_relation",
    "long_relation",
    "same_entity",
    "pronoun",
    "date_object",
    "clause_object",
    "cut_off",
]
# The reason each fault must be rejected for.
FAULT_REASONS = {
    "prose": "no_json",
    "llm_error": "llm_error",
    "missing_field": "missing_field",
    "wrong_type": "wrong_type",
    "leaning": "question_leans_on_text",
    "long": "answer_too_long",
    "ungrounded": "answer_not_grounded",
    "yes_no": "yes_no_answer",
    "in_question": "answer_in_question",
    "empty": "empty_field",
    "changed_in_question": "answer_in_question",
    "changed_unstated": "question_premise_unstated",
    "two_turns": "bad_turn_count",
    "empty_expert": "empty_field",
    "dialogue_leaning": "turn_leans_on_text",
    "not_a_list": "wrong_type",
    "bad_timestamp": "bad_timestamp",
    "timestamp_not_in_evidence": "timestamp_not_in_evidence",
    "quadruple_ungrounded": "quadruple_not_grounded",
    "duplicate": "duplicate",
    "missing_relation": "missing_field",
    "off_topic": "question_not_about_evidence",
    "giveaway": "answerable_from_question",
    "url": "contains_url",
    "garbled": "garbled_text",
    "dangling": "question_not_standalone",
    "mismatch": "answer_check_failed",
    "ungrounded_turn": "turn_not_grounded",
    "long_relation": "relation_too_long",
    "same_entity": "subject_equals_object",
    "pronoun": "vague_entity",
    "repeat": "repeated_turn",
    "cut_reply": "turn_cut_off",
    "adds_claims": "turn_adds_claims",
    "out_of_range": "evidence_out_of_range",
    "outside_input": "evidence_outside_input",
    "date_object": "object_is_date",
    "clause_object": "object_too_long",
    "cut_off": "relation_not_stated",
}


class FaultyResponder:
    """Good answers, except that the n-th request of a purpose gets the n-th fault of its list
    (every ``stride``-th request, so good items remain in between)."""

    def __init__(self, stride: int = 2) -> None:
        self.stride = stride
        self.seen: Counter[str] = Counter()
        self.injected: list[tuple[str, str]] = []  # (purpose, fault)

    def _fault_for(self, purpose: str, faults: list[str]) -> str | None:
        n = self.seen[purpose]
        self.seen[purpose] += 1
        if n % self.stride or n // self.stride >= len(faults):
            return None
        return faults[n // self.stride]

    def __call__(self, request: LLMRequest) -> str:
        table: dict[str, tuple[list[str], Callable[[str, LLMRequest], str]]] = {
            "qa_initial": (QA_FAULTS, _qa_fault),
            "qa_new": (NEW_QA_FAULTS, _qa_fault),
            "qa_changed": (CHANGED_FAULTS, _changed_fault),
            "qa_check": (CHECK_FAULTS, _check_fault),
            "dialogue": (DIALOGUE_FAULTS, _dialogue_fault),
            "quadruples": (QUADRUPLE_FAULTS, _quadruple_fault),
        }
        if request.purpose in table:
            faults, make = table[request.purpose]
            fault = self._fault_for(request.purpose, faults)
            if fault is not None:
                self.injected.append((request.purpose, fault))
                return make(fault, request)
        return good_answer(request)


TEMPORAL_FAULTS = ["leak", "no_time", "dated_now", "no_json"]
TEMPORAL_REASONS = {
    "leak": "answer_leaked",
    "no_time": "time_not_named",
    "dated_now": "names_a_time",
    "no_json": "no_usable_answer",
}


def temporal_fault(kind: str, request: LLMRequest) -> str:
    """A bad phrasing of one kind (``names_a_time`` needs a timeline request, the others
    a dated one)."""
    facts, answer, time = _temporal_input(request)
    subject, relation = facts[0][0], facts[0][1]
    question = {
        "leak": f"Is it true that {subject} {relation} {answer.split('; ')[0]} {time}?",
        "no_time": f"Which value did {subject} have for {relation}?",
        "dated_now": f"What did {subject} {relation} in 1999?",
    }.get(kind)
    return "I cannot phrase that." if question is None else json.dumps({"question": question})


def expected_reason(purpose: str, fault: str) -> str:
    """The rejection reason a fault must produce."""
    if purpose == "dialogue" and fault == "leaning":
        return "turn_leans_on_text"
    if purpose == "quadruples" and fault == "ungrounded":
        return "quadruple_not_grounded"
    return FAULT_REASONS[fault]


def openai_responder(body: dict) -> str:
    """The scripted answers behind a local OpenAI-compatible server: the prompt's purpose is
    the name of the JSON schema wikidrift sends as ``response_format``."""
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    request = LLMRequest(
        messages=tuple(body["messages"]), prompt_hash="", purpose=schema.get("name", "")
    )
    return good_answer(request)
