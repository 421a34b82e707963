"""Personal data is removed before a live consultation may become a case; guidance facts stay."""

from __future__ import annotations

import pytest

from environments.live.redaction import Redactor


@pytest.mark.parametrize(
    ("text", "gone", "label"),
    [
        ("My NI number is QQ 12 34 56 C.", "QQ 12 34 56 C", "NI_NUMBER"),
        ("NINO: ab123456d", "ab123456d", "NI_NUMBER"),
        ("Account 12345678, sort code 20-00-00.", "12345678", "ACCOUNT_NUMBER"),
        ("Account 12345678, sort code 20-00-00.", "20-00-00", "SORT_CODE"),
        ("My policy number is POL-1234567.", "POL-1234567", "ACCOUNT_NUMBER"),
        ("Membership no. 00481516 with the scheme", "00481516", "ACCOUNT_NUMBER"),
        ("IBAN GB29 NWBK 6016 1331 9268 19", "GB29 NWBK 6016 1331 9268 19", "IBAN"),
        ("Card 4111 1111 1111 1111 expired", "4111 1111 1111 1111", "CARD_NUMBER"),
        ("I was born on 12/03/1961.", "12/03/1961", "DATE"),
        ("DOB 1961-03-12", "1961-03-12", "DATE"),
        ("born 3rd March 1966 in Leeds", "3rd March 1966", "DATE"),
        ("born on March 3, 1966", "March 3, 1966", "DATE"),
        ("I was born in 1966", "1966", "DATE_OF_BIRTH"),
        ("I live at 14 Acacia Avenue.", "14 Acacia Avenue", "ADDRESS"),
        ("Flat 3, 22 High Street, Bristol", "22 High Street", "ADDRESS"),
        ("postcode LS1 4AB please", "LS1 4AB", "POSTCODE"),
        ("write to sw1a1aa", "sw1a1aa", "POSTCODE"),
        ("email me at ann.example+pension@example.co.uk", "ann.example+pension@example.co.uk", "EMAIL"),
        ("ring 07700 900123 after six", "07700 900123", "PHONE"),
        ("or +44 20 7946 0958", "20 7946 0958", "PHONE"),
        ("My name is Priya Raman and I'm 60.", "Priya Raman", "NAME"),
        ("Mrs Okonkwo said to ask you", "Okonkwo", "NAME"),
        ("my husband Dev handles the bills", "Dev", "NAME"),
        ("Hi, this is Gwen.", "Gwen", "NAME"),
    ],
)
def test_each_kind_of_personal_data_is_removed(text: str, gone: str, label: str) -> None:
    done = Redactor().redact(text)
    assert gone not in done.text
    assert f"[{label}]" in done.text
    assert done.found[label] >= 1


def test_the_names_the_firm_holds_are_removed_wherever_they_appear() -> None:
    done = Redactor(["Ann Smith"]).redact("Ann here. SMITH is my married name; ann smith on the letter.")
    assert "Ann" not in done.text and "SMITH" not in done.text and "Smith" not in done.text
    assert done.text.count("[NAME]") >= 3


def test_what_guidance_turns_on_is_kept() -> None:
    text = (
        "I'm 58 with £42,000 in my Aviva pension and a final salary scheme worth £310,000. "
        "I want to retire in 2030 at 60. How much is tax-free? May I also ask about the 25% rule?"
    )
    assert Redactor(["Ann Smith"]).redact(text).text == text


def test_words_that_are_also_names_stay_unless_capitalised_as_names() -> None:
    done = Redactor(["May Grant"]).redact("May asked if the grant may help; the grant may.")
    assert done.text == "[NAME] asked if the grant may help; the grant may."


def test_a_name_introduced_in_one_message_is_removed_from_all_of_them() -> None:
    texts, found = Redactor(["Ann Smith"]).redact_all(
        ["My name is Ann Smith, and my daughter Keziah helps me.", "Keziah thinks I should wait."]
    )
    assert all("Keziah" not in t and "Ann" not in t for t in texts)
    assert texts[1] == "[NAME] thinks I should wait."
    assert found["NAME"] >= 4


def test_introductions_do_not_eat_ordinary_words() -> None:
    done = Redactor().redact("I'm Worried about my pension. I'm retired now.")
    assert done.text == "I'm Worried about my pension. I'm retired now."
