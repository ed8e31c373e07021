"""Carried items against their edited evidence sentences (real edits of wikisnap sentences)."""

from __future__ import annotations

import pytest

from pipeline.carried_items import fact_misfit, qa_misfit, turn_misfit

pytestmark = pytest.mark.slow  # spaCy


def test_an_edit_that_no_longer_fits_the_answer() -> None:
    question = "What driver will Aston Martin retain for 2025?"
    old = "Aston Martin are set to retain Fernando Alonso as one of their drivers for 2025."
    new = (
        "Aston Martin are set to retain Fernando Alonso and Lance Stroll as their drivers for 2025."
    )
    assert "Lance Stroll" in qa_misfit(question, "Fernando Alonso", old, new)
    assert qa_misfit(question, "Fernando Alonso", new, new) == ""  # a list already: no edit
    assert qa_misfit("How many children?", "two", "He has two children.",
                       "He is married and has two children.") == ""  # fmt: skip
    assert "no longer holds" in qa_misfit(
        "How many children?", "two", "He has two children.", "He has three children."
    )
    # written otherwise, the same answer (real edits of wikisnap sentences)
    assert qa_misfit("", "25.6tbit", "It moves 25.6tbit/s.", "It moves 25.6 Tbit/s.") == ""
    assert qa_misfit("", "Florence Pugh", "Florence Pugh was born in Oxford.",
                       "Florence Rose Pugh was born in Oxford.") == ""  # fmt: skip
    assert qa_misfit(
        "When does the group stage run?", "September to December",
        "The group stage is played from September to December.",
        "The league phase is played from September to January.",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "old", "new"),
    [  # real edits of wikisnap sentences: the same answer, written otherwise
        ("December 13, 2022", "AMD launched the RX 7900 XT on December 13, 2022.",
         "The RX 7900 XT was released on Dec 13, 2022."),
        ("AG", "She was a New York State assistant AG in Brooklyn.",
         "She was a New York State assistant Attorney General in Brooklyn."),
        ("CMB", "Anisotropy in the CMB was found in 1992.",
         "Anisotropy in the cosmic microwave background was found in 1992."),
        ("the U.S. Environmental Protection Agency",
         "In 1999, the U.S. Environmental Protection Agency began investigating.",
         "In 1999, the EPA began investigating."),
    ],
)  # fmt: skip
def test_an_answer_written_otherwise_still_fits(answer: str, old: str, new: str) -> None:
    assert qa_misfit("", answer, old, new) == ""


def test_other_initials_and_dates_do_not() -> None:
    assert qa_misfit("", "DHS", "The DHS acted.", "The Department of Justice acted.")
    assert qa_misfit("", "December 13, 2022", "It opened on December 13, 2022.",
                     "It opened on Dec 14, 2022.")  # fmt: skip


def test_a_fact_whose_year_the_edit_took_out() -> None:
    old = "In May 2023, Pascal was cast in an upcoming sequel of Gladiator."
    new = "In May, Pascal was cast in an upcoming sequel of Ridley Scott's Gladiator."
    assert "2023" in fact_misfit("2023-05", old, new)
    assert fact_misfit("2023-05", old, old.replace("an upcoming", "the upcoming")) == ""
    assert fact_misfit(None, old, new) == ""  # undated: nothing to lose
    # a reworded object of a fact that still holds is no reason
    assert fact_misfit("2014-02", "In February 2014, Altman was named president of Y Combinator.",
                       "In February 2014, he was named president of YC.") == ""  # fmt: skip


def test_a_turn_whose_reply_states_what_the_edit_took_out() -> None:
    # a real edit of a wikisnap sentence (Semaglutide, 2024-06-01 -> 2025-01-01), labeled unchanged
    old = (
        "In March 2024, the US Food and Drug Administration (FDA) expanded the indication for "
        "semaglutide (Wegovy), in combination with a reduced calorie diet and increased "
        "physical activity, to reduce the risk of cardiovascular death."
    )
    new = (
        "In the US semaglutide (Wegovy) is indicated in combination with a reduced calorie "
        "diet and increased physical activity to reduce the risk of major adverse "
        "cardiovascular events."
    )
    reply = "The FDA expanded the approval of semaglutide (Wegovy) in March 2024."
    why = turn_misfit(reply, "Semaglutide", old, new)
    assert "March 2024" in why
    # a reply that states only what the edited sentence still says fits
    assert turn_misfit("It is used with a reduced calorie diet.", "Semaglutide", old, new) == ""
    assert turn_misfit(reply, "Semaglutide", old, old.replace("In March", "in March")) == ""
