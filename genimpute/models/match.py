"""Haplotype matcher: attention over the query's nearest panel haplotypes,
scored by how well each agrees with the query around the predicted variant.

Recombination makes a haplotype a mosaic of panel haplotypes (Li and
Stephens), so P(alt) at an untyped variant is a weighted vote of the panel
haplotypes the query copies there, and the weight of a haplotype depends on
how far it matches the query on either side. This backbone learns that
weighting and nothing else:
- Each gap between typed sites (every untyped column of a gap has the same
  typed evidence) keeps `rows_per_gap` candidate rows: those with the
  fewest mismatches with the query among the NEAR typed sites either side.
  Rows that disagree there would get almost no weight anyway.
- For every candidate row j of each gap, features of the agreement
  between row j and the query: its mismatches with the query among the d
  typed sites to the left and to the right, for each d of SITES (1 to 128),
  and its mismatch rate over the whole window; with, per gap, the sites the
  query has called in each of those ranges (fewer at the window's edges or
  at missing calls).
- An MLP turns the features into `heads` scores; a softmax over the
  candidates gives each head's weights, and each head's vote is the
  weighted share of candidates carrying the alt allele.
- Beside the heads, a Li and Stephens copying model over all k rows: a
  forward-backward along the typed sites, its switch rate per cM (from the
  genetic map) and its copying error learned, gives each row's posterior at
  the typed sites either side of a gap; a column's vote is the rows' alt
  alleles weighted by those posteriors, interpolated in cM. Unlike the
  heads, it weighs a row by how long it keeps matching as a whole path,
  which is what rare variants need: on held-out panel samples it took the
  rarer variants' r2 from below Beagle's to above it (see docs/results.md).
- The log-odds of the heads' votes and of the copying vote (each smoothed by
  a learned epsilon) are combined by learned weights into the query's alt
  log-odds.

The heads attend neither along variants nor across rows, so their cost per query is
k x t to count mismatches and choose candidates, then candidates x gaps x
the MLP: before candidates, a query costs a small fraction of an
MSA-Transformer pass over far fewer rows on a CPU, which is what lets it
read many more haplotypes (see docs/results.md). The copying model adds
k x (the typed sites within HORIZON of the pass's gaps) sequential steps
per pass. Context rows are not reconstructed: `forward` gives the query
row's logits and zeros for the context rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from genimpute.config import ALT, MASKED, BackboneConfig, WindowConfig

# typed sites either side of a gap whose agreement with the query is counted
SITES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
# typed sites either side of a gap whose mismatches choose its candidate rows (MatchConfig.rows_per_gap);
# on held-out samples, models trained with fewer or more sites scored no better (see docs/results.md)
NEAR = 8
# typed sites either side of the gaps of a pass that the copying model's forward-backward runs over
HORIZON = 128


# mismatch counts are int16 prefix sums over a window's typed sites (_weights)
MAX_TYPED = torch.iinfo(torch.int16).max


@dataclass(frozen=True)
class MatchConfig(BackboneConfig):
    """The `match` backbone's settings: `dim` is its scoring MLP's width,
    `layers` the MLP's layers."""

    name = "match"
    heads: int = 4  # scores per candidate row, each a softmax over the candidates and a vote
    # each gap's vote is over this many context rows, those with the fewest
    # mismatches with the query among the NEAR typed sites on either side
    # (the rest would get almost no weight); 0 scores all k rows
    rows_per_gap: int = 24

    def __post_init__(self):
        super().__post_init__()
        self.require_at_least(heads=1, rows_per_gap=0)

    def check_window(self, window: WindowConfig) -> None:
        if window.typed > MAX_TYPED:
            raise ValueError(f"match window typed: expected at most {MAX_TYPED} typed sites (mismatches are counted "
                             f"in int16); found {window.typed}")


def _left_right_bounds(typed: torch.Tensor, columns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each of `columns`, (lo, hi): its evidence is typed sites [0, lo)
    on the left and [hi, t) on the right, t the window's typed sites. An
    untyped column has lo == hi; a typed one leaves itself out (hi = lo + 1)."""
    before = torch.cumsum(typed.long(), 0) - typed.long()  # typed columns strictly left of each column
    lo = before[columns]
    return lo, lo + typed[columns].long()


def _ranges(lo: torch.Tensor, hi: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(left, right), each (G, len(SITES)): the evidence ranges of G gaps,
    typed sites [left, lo) and [hi, right), d sites each side for each d of
    SITES (fewer at the window's edges)."""
    sites = torch.tensor(SITES, device=lo.device)
    return (lo[:, None] - sites).clamp(min=0), (hi[:, None] + sites).clamp(max=t)


def _range_ends(lo, hi, left, right) -> torch.Tensor:
    """(G, 2 + 2 * len(SITES)) prefix-sum positions that bound each gap's
    evidence ranges: lo, hi, then the left ends, then the right ends."""
    return torch.cat([lo[:, None], hi[:, None], left, right], 1)


def _totals(at: torch.Tensor) -> torch.Tensor:
    """(..., G, 2 * len(SITES)): from prefix sums at each gap's _range_ends
    (..., G, 2 + 2 * len(SITES)), the totals over typed sites [left, lo) and
    [hi, right) of each range."""
    n = len(SITES)
    return torch.cat([at[..., :1] - at[..., 2: 2 + n], at[..., 2 + n:] - at[..., 1:2]], -1)


def _take_columns(x: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """x[..., columns] for ascending `columns`, copied run by run: a window's
    typed columns come in a few long runs, and copying slices is much
    faster than a gather along the last dimension on a CPU."""
    if not len(columns):
        return x[..., :0]
    breaks = (torch.nonzero(columns[1:] - columns[:-1] != 1).squeeze(1) + 1).tolist()
    starts, ends = [0, *breaks], [*breaks, len(columns)]
    bounds = torch.stack([columns[starts], columns[[e - 1 for e in ends]] + 1], 1).tolist()
    return torch.cat([x[..., a:b] for a, b in bounds], -1)


def _take_rows(x: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """x[b, rows[b, ...], columns] for x (B, R, W): rows (B or 1, ...) and
    columns broadcast together. Read with one 1-d take of flat offsets,
    faster on a CPU than indexing x by (batch, row, column)."""
    b, n_rows, width = x.shape
    batch = torch.arange(b, device=x.device).view(b, *[1] * (rows.dim() - 1))
    return x.take((batch * n_rows + rows) * width + columns)


def _prefix_sums(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(..., t) -> (..., t+1): sums over sites [0, i), in `dtype`. Summed
    straight into the output, without a padded copy of x: half the time."""
    sums = torch.empty((*x.shape[:-1], x.shape[-1] + 1), dtype=dtype, device=x.device)
    sums[..., 0] = 0
    torch.cumsum(x, -1, dtype=dtype, out=sums[..., 1:])
    return sums


def _smoothed_log_odds(p: torch.Tensor, smoothing: torch.Tensor) -> torch.Tensor:
    """log-odds of a vote p in [0, 1], pulled in by epsilon = sigmoid(smoothing)
    at both ends, so that a unanimous vote stays finite."""
    eps = torch.sigmoid(smoothing)
    p = (p + eps) / (1 + 2 * eps)
    return torch.log(p) - torch.log1p(-p)


class HaplotypeMatcher(nn.Module):
    """The `match` backbone (module docstring); a nearest-context backbone's interface."""

    shares_context = False  # each query has its own nearest-haplotype context
    reconstructs_context = False  # training has no context-reconstruction term
    # validation r2 rises with the context up to about this size and no further; held-out r2 is the same with
    # a narrower window and more rows as with this one, which imputes faster (see docs/results.md)
    default_window = WindowConfig(untyped=300, typed=300, context=128)
    # larger passes save little more model time per query (see docs/results.md)
    queries_per_cpu_pass = 128

    def __init__(self, config: MatchConfig):
        super().__init__()
        self.config = config
        n = 2 * len(SITES)
        # the first layer is split by what its inputs vary with, so each part is computed at its own size
        self.from_mismatches = nn.Linear(n + 1, config.dim)  # per (query, row, gap); + the row's mismatch rate
        self.from_observed = nn.Linear(n, config.dim, bias=False)  # per (query, gap): sites seen, edges
        hidden = []
        for _ in range(config.layers - 1):
            hidden += [nn.Linear(config.dim, config.dim), nn.GELU()]
        self.score = nn.Sequential(nn.GELU(), *hidden, nn.Linear(config.dim, config.heads))
        self.mix = nn.Parameter(torch.full((config.heads,), 0.25 / config.heads))
        self.bias = nn.Parameter(torch.zeros(()))
        self.smoothing = nn.Parameter(torch.tensor(-4.0))  # epsilon = sigmoid(-4) ~ 0.018 at the start
        # the copying model (_copying_posteriors): switches per cM, log; copying error, logit. Starting values
        # from held-out panel samples, where a wide range of switch rates and errors around these score alike
        self.switch_rate = nn.Parameter(torch.tensor(5.0).log())
        self.copy_error = nn.Parameter(torch.logit(torch.tensor(1e-3)))
        self.copying_smoothing = nn.Parameter(torch.tensor(-7.0))
        # its alt log-odds enter the output with this weight; the heads' with `mix`. Held-out r2 of the two
        # averaged was highest at about 3:1, the starting point
        self.copying_mix = nn.Parameter(torch.tensor(0.75))

    def _weights(self, mismatch: torch.Tensor, observed: torch.Tensor, lo: torch.Tensor,
                 hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weights, rows) around G gaps: each head's weights (B, r, G, heads),
        a softmax over the r candidate rows of each gap, and those rows
        (B, r, G) as _candidates; rows is None when the candidates are all k rows.

        mismatch: (B, k, t) context rows against the query at the typed columns (False at missing calls)
        observed: (B, t) the query's calls at the typed columns
        lo, hi:   (G,) evidence bounds of each gap, as _left_right_bounds
        """
        t = mismatch.shape[-1]
        left, right = _ranges(lo, hi, t)
        ends = _range_ends(lo, hi, left, right)  # (G, 2 + 2 * len(SITES))
        # int16 (counts up to t, a window's typed sites): half of float32's bytes and a faster cumsum
        mis_sums = _prefix_sums(mismatch, torch.int16)  # (B, k, t+1)
        obs_sums = _prefix_sums(observed, torch.float32)  # (B, t+1)
        rate = mis_sums[..., -1] / obs_sums[:, -1:].clamp(min=1)  # (B, k) float
        rows = self._candidates(mis_sums, ends)  # (B, r, G), or None for all k rows
        if rows is None:
            at, rate = mis_sums[..., ends], rate[..., None].expand(-1, -1, len(lo))  # (B, k, G, ends), (B, k, G)
        else:
            at = _take_rows(mis_sums, rows[..., None], ends)  # (B, r, G, ends)
            rate = rate.gather(1, rows.flatten(1)).view(rows.shape)
        mis = torch.cat([torch.log1p(_totals(at).float()), rate[..., None]], -1)
        seen = _totals(obs_sums[:, ends]) / torch.tensor(SITES, device=lo.device).repeat(2)  # (B, G, 2n)
        weights = self.score(self.from_mismatches(mis) + self.from_observed(seen)[:, None]).softmax(1)
        return weights, rows

    def _candidates(self, mis_sums: torch.Tensor, ends: torch.Tensor) -> torch.Tensor | None:
        """(B, r, G) the context rows each gap's vote is over: the r =
        rows_per_gap with the fewest mismatches among the NEAR typed sites
        on either side, ties going to the fewest in the window, then to the
        earlier row, so that the choice is exact. None when that is every row."""
        r, (_, k, width) = self.config.rows_per_gap, mis_sums.shape
        if not r or r >= k:
            return None
        near = SITES.index(NEAR)
        bounds = torch.cat([ends[:, 0], ends[:, 1], ends[:, 2 + near], ends[:, 2 + len(SITES) + near]])
        at = mis_sums.index_select(-1, bounds).long().unflatten(-1, (4, -1))
        local = at[..., 0, :] - at[..., 2, :] + at[..., 3, :] - at[..., 1, :]  # (B, k, G) mismatch counts
        in_window = mis_sums[..., -1:].long()  # (B, k, 1)
        key = (local * width + in_window) * k + torch.arange(k, device=local.device).view(1, k, 1)
        return key.topk(r, dim=1, largest=False, sorted=False).indices

    def _copying_posteriors(self, mismatch: torch.Tensor, genetic: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        """(len(sites), B, k) P(the query copies context row j at typed site
        i), for i in `sites` (ascending), in the Li and Stephens model: along
        the typed sites the query copies one row at a time, switches to a row
        drawn at random with probability 1 - exp(-rate x cM) between sites,
        and shows the copied allele but for an error. Forward-backward,
        normalised at every site.

        mismatch: (B, k, t) rows against the query at the typed sites (False at missing calls: no evidence)
        genetic:  (t,) the sites' cM
        """
        t, k = mismatch.shape[-1], mismatch.shape[1]
        error = torch.sigmoid(self.copy_error)
        switch = -torch.expm1(-self.switch_rate.exp() * (genetic[1:] - genetic[:-1]).clamp(min=0))  # (t-1,)
        # with each state summing to 1, staying (1 - s) and jumping (s / k to every row) is, up to a factor,
        # adding s / (k (1 - s)) to every row; s stops short of 1 (across a centromere, say), where that
        # would be infinite: the state is then as good as uniform
        switch = switch.clamp(max=1 - 1e-4)
        jump = switch / (k * (1 - switch))
        if torch.is_grad_enabled():
            jumps = jump.unbind()
        else:  # imputing: Python floats, no 0-d tensor per step
            error, jumps = error.item(), jump.tolist()
        emit = torch.where(mismatch.permute(2, 0, 1).contiguous(), error, 1 - error)  # (t, B, k)
        wanted = sites.tolist()
        # forward: copying paths up to site i, its emission in; up to the last wanted site
        forward = {0: emit[0] / emit[0].sum(-1, keepdim=True)}
        for i in range(1, wanted[-1] + 1):
            x = emit[i] * (forward[i - 1] + jumps[i - 1])
            forward[i] = x / x.sum(-1, keepdim=True)
        # backward, the same from the other end: paths from site i on, its emission in; down to the first
        # wanted site's next
        backward = {t - 1: emit[t - 1] / emit[t - 1].sum(-1, keepdim=True)}
        for i in range(t - 2, wanted[0], -1):
            x = emit[i] * (backward[i + 1] + jumps[i])
            backward[i] = x / x.sum(-1, keepdim=True)
        # at site i: the paths to it, times those after it (the next site's backward state plus the jump)
        posterior = torch.stack([forward[i] * (backward[i + 1] + jumps[i]) if i < t - 1 else forward[i]
                                 for i in wanted])
        return posterior / posterior.sum(-1, keepdim=True)

    def _copying_vote(self, mismatch: torch.Tensor, context: torch.Tensor, typed_columns: torch.Tensor,
                      columns: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, which: torch.Tensor,
                      genetic: torch.Tensor) -> torch.Tensor:
        """(B, C) each column's share of alt alleles among all k rows,
        weighted by the rows' copying posteriors at the typed sites left and
        right of its gap (a typed column: its own site, twice), interpolated
        in cM between the two. The forward-backward runs over the typed sites
        within HORIZON of the gaps' (the copying model forgets sooner).

        mismatch: (B, k, t); context: (B, k, M) the rows' tokens (REF or ALT);
        typed_columns: (t,); columns: (C,) ascending; lo, hi: (G,) as _left_right_bounds;
        which: (C,) each column's gap; genetic: (M,) cM of the window's columns
        """
        t = mismatch.shape[-1]
        left = torch.where(hi > lo, lo, lo - 1).clamp(0, t - 1)
        right = lo.clamp(max=t - 1)
        sites, where = torch.unique(torch.stack([left, right], 1).flatten(), return_inverse=True)
        first, last = max(0, int(sites[0]) - HORIZON), min(t, int(sites[-1]) + 1 + HORIZON)
        posterior = self._copying_posteriors(mismatch[..., first:last], genetic[typed_columns[first:last]],
                                             sites - first)
        posterior = posterior[where].transpose(0, 1).contiguous()  # (B, 2G, k): each gap's left, then right site
        # a gap's columns are consecutive columns of the window (no typed column between them), so each gap
        # is one (2, k) x (k, run) product over a slice of the context, read without a copy
        counts = torch.bincount(which, minlength=len(lo))
        firsts = columns[torch.cumsum(counts, 0) - counts].tolist()  # each gap's first column
        votes = [torch.bmm(posterior[:, 2 * g: 2 * g + 2], context[..., a: a + n].to(posterior.dtype))
                 for g, (a, n) in enumerate(zip(firsts, counts.tolist()))]
        from_left, from_right = torch.cat(votes, -1).unbind(1)
        at_left, at_right = genetic[typed_columns[left[which]]], genetic[typed_columns[right[which]]]
        span = at_right - at_left
        share = torch.where(span > 0, (genetic[columns] - at_left) / torch.where(span > 0, span, 1), 0.5).clamp(0, 1)
        return (1 - share) * from_left + share * from_right

    def _log_odds(self, tokens: torch.Tensor, typed: torch.Tensor, columns: torch.Tensor,
                  genetic: torch.Tensor) -> torch.Tensor:
        """(B, C) query alt log-odds at `columns` (C,) of tokens (B, R, M),
        genetic (M,) the columns' cM. Context cells are taken to be REF or
        ALT (a panel has no missing alleles)."""
        lo, hi = _left_right_bounds(typed, columns)
        width = typed.numel() + 1
        gaps, which = torch.unique(lo * width + hi, return_inverse=True)  # the columns' distinct evidence
        gap_lo, gap_hi = gaps // width, gaps % width
        typed_columns = torch.nonzero(typed).squeeze(1)
        at_typed = _take_columns(tokens, typed_columns)
        query, context = at_typed[:, 0], at_typed[:, 1:]
        observed = query != MASKED  # (B, t)
        mismatch = (context != query[:, None]) & observed[:, None]  # (B, k, t)
        weights, rows = self._weights(mismatch, observed, gap_lo, gap_hi)
        # the heads vote over each gap's candidates: their alleles (B, r, C), 1 where ALT (with REF, ALT,
        # MASKED = 0, 1, 2, x & 1 is x == ALT, and faster than comparing), times the gap's weights, as a batch
        # of (heads, r) x (r, 1) products over (B, C)
        alt = _take_columns(tokens[:, 1:], columns) if rows is None else \
            _take_rows(tokens, 1 + rows.index_select(2, which), columns)
        alt = alt.bitwise_and_(ALT).to(torch.float32)
        weights = weights.permute(0, 2, 3, 1).index_select(1, which)  # (B, C, heads, r)
        vote = torch.matmul(weights, alt.transpose(1, 2)[..., None]).squeeze(-1)  # (B, C, heads)
        copied = self._copying_vote(mismatch, tokens[:, 1:], typed_columns, columns, gap_lo, gap_hi, which, genetic)
        return _smoothed_log_odds(vote, self.smoothing) @ self.mix + self.bias \
            + self.copying_mix * _smoothed_log_odds(copied, self.copying_smoothing)

    def forward(self, tokens: torch.Tensor, typed: torch.Tensor, genetic: torch.Tensor) -> torch.Tensor:
        # tokens (B, R, M), typed (M,) bool, genetic (M,) cM -> logits (B, R, M): the query row's; 0 for context rows
        out = torch.zeros(tokens.shape, device=tokens.device)
        out[:, 0] = self._log_odds(tokens, typed, torch.arange(tokens.shape[-1], device=tokens.device), genetic)
        return out

    def query_logits(self, tokens: torch.Tensor, typed: torch.Tensor, genetic: torch.Tensor) -> torch.Tensor:
        """forward(tokens, typed, genetic)[:, 0][:, ~typed], for those columns alone."""
        return self._log_odds(tokens, typed, torch.nonzero(~typed).squeeze(1), genetic)
