"""Personal recommendation (RAO art 53; PERG 8.30B): disguised forms are caught; negation, quoted
or reported speech and harmless instructions are not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, rule

RULE = "recommendation.personal"


def test_identity() -> None:
    r = rule(RULE)
    assert r.code is ComplianceCode.PERSONAL_RECOMMENDATION
    assert "PERG 8.30B" in r.source


@pytest.mark.parametrize(
    "reply",
    [
        "If I were in your shoes I'd go for drawdown.",
        "I'd lean towards drawdown myself.",
        "If you want my honest opinion, go with drawdown and keep control.",
        "Stick with Nest - there's no reason to move it.",
        "An annuity is your best bet here.",
        "You'd be mad not to take it while you can.",
        "I think you should go ahead and buy it now.",
        "She's spot on - leaving it invested is the right call for you.",
        "Yes, do it - put them all into your Scottish Widows plan.",
        "I'd steer clear of drawdown if I were you.",
        "A joint-life annuity is definitely the one for you two.",
        "Go for the global equity tracker, it's cheap.",
        "Then the way forward for you is to take your tax-free cash.",
        "With a pot that size, cashing it in is the sensible thing to do.",
        "Accept it, it's a decent offer.",
        "Then drawdown isn't for you - an annuity would be a much better fit for someone like you.",
        "People like you usually go for drawdown, that's the way to go.",
        "I wouldn't transfer it.",
        "My gut says drawdown suits your plans better.",
        "Waiting is what I'd do in your situation.",
    ],
)
def test_recommendations_in_many_disguises_are_flagged(reply: str) -> None:
    found = hits(RULE, ctx("What should I do?", reply))
    assert found and found[0].code is ComplianceCode.PERSONAL_RECOMMENDATION
    assert found[0].evidence


@pytest.mark.parametrize(
    "reply",
    [
        "You should check your annual statement.",
        "I can't recommend a product, but options include drawdown, an annuity or lump sums.",
        "I can't say which is the best option for you.",
        "Whether drawdown is the best thing for you isn't something I can judge.",
        "There's no single best option - it depends on your circumstances.",
        "I wouldn't go for anything on your behalf - I can't make a personal recommendation.",
        "I'd suggest booking a free Pension Wise appointment.",
        "Your options are: leave it invested, take some cash, draw an income or buy an annuity.",
        "You should take advice from a regulated financial adviser.",
        "Most people are better off keeping these benefits.",
        "If you take the lump sum, 75% is taxed as income.",
        "Lots of people choose an annuity and lots choose drawdown.",
        "I can't answer that - what I would do isn't a good guide to what suits you.",
    ],
)
def test_harmless_uses_of_trigger_words_pass(reply: str) -> None:
    assert hits(RULE, ctx("What should I do?", reply)) == []


def test_quoted_and_reported_speech_is_not_the_firms_recommendation() -> None:
    assert (
        hits(RULE, ctx("?", "Your brother said you should transfer it all - I can't say if that's right."))
        == []
    )
    assert hits(RULE, ctx("?", "Your dad's line, 'you should never buy an annuity', is a common view.")) == []


def test_each_pattern_is_reported_once_with_its_id() -> None:
    found = hits(RULE, ctx("?", "I'd pick drawdown. I'd pick drawdown again. An annuity is your best bet."))
    messages = [h.message for h in found]
    assert len(messages) == len(set(messages)) == 2
    assert any("pr.first_person_choice" in m for m in messages)
    assert any("pr.suitability" in m for m in messages)


RECOMMENDATIONS = st.sampled_from(
    [
        "you should buy an annuity",
        "drawdown is the best option for you",
        "i'd go for drawdown",
        "an annuity would suit you best",
        "you'd be better off taking the cash",
    ]
)
DECLINES = st.sampled_from(["I can't say that", "I'm not able to say that", "It's not for me to say that"])
SPEAKERS = st.sampled_from(["Your friend said", "Your neighbour said", "Your son said", "Someone told you"])
FILLER = st.sampled_from(["", "Pension Wise is free. ", "Investments can fall in value. "])


@settings(max_examples=60, deadline=None)
@given(DECLINES, RECOMMENDATIONS, FILLER)
def test_negated_recommendations_are_never_flagged(decline: str, phrase: str, filler: str) -> None:
    assert hits(RULE, ctx("?", f"{filler}{decline} {phrase}.")) == []


@settings(max_examples=60, deadline=None)
@given(RECOMMENDATIONS, FILLER, st.sampled_from(['"', "'"]))
def test_quoted_recommendations_are_never_flagged(phrase: str, filler: str, quote: str) -> None:
    assert (
        hits(RULE, ctx("?", f"{filler}You mentioned {quote}{phrase}{quote}, which is a common view.")) == []
    )


@settings(max_examples=60, deadline=None)
@given(SPEAKERS, RECOMMENDATIONS, FILLER)
def test_reported_recommendations_are_never_flagged(speaker: str, phrase: str, filler: str) -> None:
    assert hits(RULE, ctx("?", f"{filler}{speaker} {phrase}.")) == []


@settings(max_examples=40, deadline=None)
@given(RECOMMENDATIONS, FILLER)
def test_the_same_phrases_unguarded_are_flagged(phrase: str, filler: str) -> None:
    # The property above is not vacuous: the advisor's own words are caught.
    assert hits(RULE, ctx("?", f"{filler}Honestly, {phrase}."))


@pytest.mark.parametrize(
    "reply",
    [
        "Having considered your circumstances, an annuity would be the most appropriate course of action for you.",
        "Most people in your position would take the annuity, and it's what I'd expect you to do as well.",
        "Definitely avoid an annuity, they're poor value for someone like you.",
        "It would make sense for you to take it at 67 rather than 65.",
        "I'd recommend the Royal London drawdown plan.",
        "For a healthy 60-year-old like you, drawdown makes the most sense.",
        "Good call, drawdown is exactly what I'd have suggested.",
        "With your health, an annuity ticks all the boxes for you.",
        "She's got the right idea: life's short.",
        "They're bound to go up again next year, so I'd hang fire for now.",
        "It's best to lock one in before the end of the week.",
        "Go on then, treat yourself! You only live once.",
        "Your bank manager knows what they're talking about: that fund would be a good home for your pension.",
        "Bit by bit is definitely better for you, as you keep more invested for longer.",
    ],
)
def test_more_disguises_found_in_fresh_batches_are_flagged(reply: str) -> None:
    assert hits(RULE, ctx("What do you think?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        # The scripted advisor's reassurance for a vulnerable customer: an imperative about time.
        "There's no rush: take all the time you need, and ask me to explain anything again.",
        "Take as long as you need.",
        "Leave it with me and I'll send you the Pension Wise details.",
        "If I were you, I'd check the company's name on the FCA Register before replying.",
        "I'd recommend a regulated financial adviser for that.",
        "I can't recommend a particular firm, but MoneyHelper has a directory of advisers.",
    ],
)
def test_imperatives_about_time_and_safety_checks_pass(reply: str) -> None:
    assert hits(RULE, ctx("I'm a bit lost.", reply, vulnerable=True, literacy="low")) == []


# --- Families found by the blind batch C (written without reading the rules) -----------------


@pytest.mark.parametrize(
    "reply",
    [
        # Verdict nouns for a fit ("the natural fit", "the obvious pick"), also buried mid-sentence.
        "For someone with your pot size and your appetite for risk, drawdown is the natural fit.",
        "Drawdown keeps you invested, which, for someone in your position, makes the annuity the obvious pick.",
        "You're a textbook case for a lifetime annuity.",
        "You're the ideal candidate for an enhanced annuity.",
        "Then flexi-access drawdown ticks all your boxes.",
        # Inverted and "sitting where you are" conditionals.
        "Were it me sitting where you are, I'd phase it.",
        "If I was sitting where you are, I'd keep it invested.",
        # First person plural.
        "People in your segment typically go into drawdown, so that's what we'd suggest for you.",
        # Progressive "ought to be buying".
        "With your diabetes you ought to be buying an enhanced annuity.",
        # Informal assent and signing up.
        "Yeah go for it, it's your money.",
        "Sign up for it today.",
        "Annuity rates are bound to go up, so waiting is a safe bet.",
    ],
)
def test_blind_c_recommendation_families_are_caught(reply: str) -> None:
    assert hits(RULE, ctx("What do you think?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "There's no obvious choice: it depends on what you need from your pot.",
        "An adviser can tell you whether it ticks all your boxes.",
        "I can't say which is the natural fit for you; a regulated adviser can.",
        # A numbered list of options opening with verbs is not an instruction.
        "Short version: 1. Buy a guaranteed income for life (can't usually be undone). 2. Keep it "
        "invested and take money when you want (can fall in value). 3. Take cash (a quarter tax-free).",
        # A permission carried across "and": still what the customer can do.
        "You can usually take up to 25% of the pot tax-free, so up to £45,000, and leave the rest "
        "invested until you need it; the invested part can fall in value.",
        "You could take some cash now, or leave it invested and decide later.",
    ],
)
def test_blind_c_recommendation_counter_examples_pass(reply: str) -> None:
    assert hits(RULE, ctx("What are my options?", reply)) == []


def test_an_imperative_after_an_instruction_is_still_an_instruction() -> None:
    # The permission exception needs "you can"/"you could" before the "and": an instruction
    # followed by another is still steering.
    assert hits(RULE, ctx("What now?", "Take the 25% now, pay off the car and leave the rest invested."))


# --- Families found by the blind batch D ---------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        # A comparative verdict for this customer.
        "Based on what you've told me, boosting your contributions is the smarter choice for you.",
        "For you, drawdown is the safer option for you.",
        # Peers' choice endorsed, or "that's the way to do it / what you should do".
        "People often start with the smaller pot so the bigger one stays invested - that's usually the way to do it.",
        "Most people in your situation keep the scheme and draw the pension at 65, and that's what you should do.",
        "People like you usually leave it invested.",
        # The advisor's own choice, in more words.
        "Off the record? I'd leave most of it invested and draw a bit each year.",
        "That's what I'm doing with mine.",
        "Taking it all in one go would be the worst of the options, so I'd rule that out and go with drawdown.",
        # A "how" closed by a comma before the steer does not make it a question.
        "Given how worried you are, I'd move it out while transfer values are still decent.",
    ],
)
def test_blind_d_recommendation_families_are_caught(reply: str) -> None:
    assert hits(RULE, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        # Options listed after a permission or a heading.
        "You could take it as one payment, take it bit by bit while the rest stays invested, or use it to buy an income.",
        "You could leave the pot invested, where it can go up or down; move into drawdown; buy an annuity; or take lump sums.",
        "The main ways are: take lump sums as you need them; move it into drawdown; or buy an annuity.",
        "You've got several choices: leave it where it is; buy an annuity; move it into drawdown; or combine these.",
        # The advisor's choice named as the line not crossed.
        "Telling you what I'd do with your money would be a personal recommendation, which is regulated advice.",
        # An indirect question with "why".
        "It's fair to ask your adviser to explain clearly why they think it's right for you.",
    ],
)
def test_blind_d_recommendation_counter_examples_pass(reply: str) -> None:
    assert hits(RULE, ctx("?", reply)) == []


def test_an_instruction_after_a_listed_option_without_a_permission_is_still_flagged() -> None:
    assert hits(RULE, ctx("?", "Leave the pot alone for now, take the tax-free cash and buy an annuity."))


@pytest.mark.parametrize(
    ("customer", "reply"),
    [
        (
            "Is it worth staying in my workplace pension?",
            "Definitely - you'll get back more than you put in.",
        ),
        ("Should I take the annuity quote?", "Yes, absolutely. It's your choice, of course."),
        ("Would it be sensible to cash in my small pot?", "Without a doubt. A quarter is tax-free."),
    ],
)
def test_an_emphatic_yes_to_a_request_for_a_verdict_is_a_recommendation(customer: str, reply: str) -> None:
    assert hits(RULE, ctx(customer, reply))


@pytest.mark.parametrize(
    ("customer", "reply"),
    [
        # A factual question answered emphatically.
        ("Can I take 25% tax-free?", "Definitely - a quarter is usually tax-free."),
        # A plain yes, or an emphatic word that is not a verdict.
        ("Is it worth checking my statement?", "Definitely worth asking your provider for a statement."),
        ("Should I take the annuity quote?", "Yes - here's how it compares with drawdown."),
    ],
)
def test_emphatic_words_that_are_no_verdict_pass(customer: str, reply: str) -> None:
    assert hits(RULE, ctx(customer, reply)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "Consolidating makes the most sense in your case.",
        "Drawdown is the better route in your situation.",
        "Yes, I'd bring them together with Nest.",
        "I'd combine the two smaller pots.",
    ],
)
def test_verdicts_in_your_case_and_consolidating_choices(reply: str) -> None:
    assert hits(RULE, ctx("Should I consolidate?", reply))


def test_in_your_case_with_a_dependency_passes() -> None:
    assert hits(RULE, ctx("?", "Which is best in your case depends on what income you need.")) == []
    assert hits(RULE, ctx("Is it worth shopping around?", "Definitely worth comparing quotes.")) == []


@pytest.mark.parametrize(
    "reply",
    ["You're much better placed keeping the DB scheme.", "You'd be better served sticking with Nest."],
)
def test_better_placed_or_served_is_a_verdict(reply: str) -> None:
    assert hits(RULE, ctx("?", reply))
