"""K-mer tokens: grouping, codes, classes and the way back to per-variant P(alt)."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from genimpute.config import MASKED
from genimpute.models.kmers import (PADDED_LOG_ODDS, allele_classes, alt_log_odds, class_bits, group_columns,
                                    independent_class_log_probs, input_codes)


@given(n=st.integers(0, 40), k=st.integers(1, 6))
def test_groups_cover_every_column_once_in_order(n, k):
    columns = torch.arange(n) * 3 + 1
    groups = group_columns(columns, k)
    assert groups.shape == (-(-n // k), k)
    assert groups[groups >= 0].tolist() == columns.tolist()  # padding only at the end
    assert (groups[:-1] >= 0).all()


@settings(max_examples=50)
@given(st.data())
def test_allele_classes_decode_back_to_the_alleles(data):
    k = data.draw(st.integers(1, 6))
    m = data.draw(st.integers(1, 30))
    alleles = torch.tensor(data.draw(st.lists(st.lists(st.integers(0, 1), min_size=m, max_size=m), min_size=1, max_size=4)))
    groups = group_columns(torch.arange(m), k)
    classes = allele_classes(alleles, groups)  # (B, G)
    assert ((classes >= 0) & (classes < 2 ** k)).all()
    decoded = class_bits(k)[classes].flatten(1)[:, (groups >= 0).flatten()]  # (B, m)
    assert decoded.long().tolist() == alleles.tolist()


def test_input_codes_tell_every_cell_pattern_apart():
    k = 3
    patterns = torch.tensor(list(itertools.product([0, 1, MASKED], repeat=k)))  # (27, 3)
    codes = input_codes(patterns, group_columns(torch.arange(k), k))[:, 0]
    assert sorted(codes.tolist()) == list(range(3 ** k))


def test_padding_reads_as_masked():
    groups = group_columns(torch.arange(4), 3)  # second group: column 3, then two pads
    tokens = torch.tensor([[1, 0, 1, 1]])
    assert input_codes(tokens, groups)[0, 1] == 1 + 3 * MASKED + 9 * MASKED


@pytest.mark.parametrize("k", [1, 2, 5])
def test_alt_log_odds_marginalise_the_classes(k):
    torch.manual_seed(0)
    m = 2 * k + 1  # the last group padded
    groups = group_columns(torch.arange(m), k)
    logits = torch.randn(3, len(groups), 2 ** k, dtype=torch.float64)
    probs = logits.softmax(-1)
    bits = class_bits(k).to(torch.float64)  # (2^K, K)
    p_alt = (probs @ bits).flatten(1)[:, (groups >= 0).flatten()]  # brute force: sum of the classes with the bit set
    torch.testing.assert_close(torch.sigmoid(alt_log_odds(logits, groups)), p_alt)


def test_confident_classes_give_their_alleles():
    k = 4
    alleles = torch.tensor([[0, 1, 1, 0, 1, 0, 0]])
    groups = group_columns(torch.arange(7), k)
    logits = torch.full((1, len(groups), 2 ** k), -30.0)
    logits[0, torch.arange(len(groups)), allele_classes(alleles, groups)[0]] = 30.0
    assert (alt_log_odds(logits, groups) > 0).long().tolist() == alleles.tolist()


def test_independent_class_log_probs_are_a_distribution_that_alt_log_odds_inverts():
    groups = group_columns(torch.tensor([0, 2, 3, 5, 7, 8, 9]), 3)  # the last group padded
    log_odds = torch.randn(4, 7) * 3
    classes = independent_class_log_probs(log_odds, groups)
    assert classes.shape == (4, 3, 8)
    torch.testing.assert_close(classes.logsumexp(-1), torch.zeros(4, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(alt_log_odds(classes, groups), log_odds, atol=1e-4, rtol=0)
    padded = class_bits(3)[:, 1:].any(-1)  # classes with ALT in the padding: beyond doubt not
    assert (classes[:, 2, padded] < -PADDED_LOG_ODDS + 1).all()
