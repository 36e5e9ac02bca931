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
- The log-odds of the heads' votes (smoothed by a learned epsilon) are
  combined by learned weights into the query's alt log-odds.

Nothing here attends along variants or mixes rows, so the cost per query is
k x t to count mismatches and choose candidates, then candidates x gaps x
the MLP: before candidates, at k=160 a query costs about a seventeenth of a
MSA-Transformer pass at k=24 on a CPU, which is what lets it read 160
haplotypes (BENCHMARKS.md). Context rows are not reconstructed: `forward` gives the
query row's logits and zeros for the context rows.
"""

from __future__ import annotations

import torch
from torch import nn

from genimpute.config import ALT, MASKED, ModelConfig, WindowConfig

# typed sites either side of a gap whose agreement with the query is counted
SITES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
# typed sites either side of a gap whose mismatches choose its candidate rows (ModelConfig.rows_per_gap);
# held-out r2 by NEAR, the stop-18 model: 4 0.9763, 8 0.9767, 16 0.9766, 32 0.9755 (BENCHMARKS.md)
NEAR = 8


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
    typed columns come in a few long runs, and copying slices is about 6x
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


class HaplotypeMatcher(nn.Module):
    """The `match` backbone (module docstring); a nearest-context backbone's interface."""

    shares_context = False  # each query has its own nearest-haplotype context
    reconstructs_context = False  # training has no context-reconstruction term
    # validation r2 on chr20_1kgp1 after 3 minutes: 0.966 at k=64, 0.970 at 160, 0.970 at 400. Held-out r2
    # of one model stays at 0.9767 from U, T, k, rows_per_gap = 200, 300, 160, 32 to 300, 300, 128, 24
    # (0.9766 with NEAR=16), which imputes in about 0.7 of the time (BENCHMARKS.md)
    default_window = WindowConfig(untyped=300, typed=300, context=128)
    # model time per query: 0.207 ms in passes of 64, 0.194 in 128, 0.188 in 256
    queries_per_cpu_pass = 128

    def __init__(self, config: ModelConfig):
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
        self.mix = nn.Parameter(torch.full((config.heads,), 1.0 / config.heads))
        self.bias = nn.Parameter(torch.zeros(()))
        self.smoothing = nn.Parameter(torch.tensor(-4.0))  # epsilon = sigmoid(-4) ~ 0.018 at the start

    def _weights(self, query: torch.Tensor, context: torch.Tensor, lo: torch.Tensor,
                 hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weights, rows) around G gaps: each head's weights (B, r, G, heads),
        a softmax over the r candidate rows of each gap, and those rows
        (B, r, G) as _candidates; rows is None when the candidates are all k rows.

        query:   (B, t) tokens at the typed columns (MASKED: missing call)
        context: (B, k, t) tokens at the typed columns
        lo, hi:  (G,) evidence bounds of each gap, as _left_right_bounds
        """
        t = context.shape[-1]
        left, right = _ranges(lo, hi, t)
        ends = _range_ends(lo, hi, left, right)  # (G, 2 + 2 * len(SITES))
        observed = query != MASKED  # (B, t)
        mismatch = (context != query[:, None]) & observed[:, None]  # (B, k, t)
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
        r, (b, k, width) = self.config.rows_per_gap, mis_sums.shape
        if not r or r >= k:
            return None
        near = SITES.index(NEAR)
        bounds = torch.cat([ends[:, 0], ends[:, 1], ends[:, 2 + near], ends[:, 2 + len(SITES) + near]])
        at = mis_sums.index_select(-1, bounds).long().unflatten(-1, (4, -1))
        local = at[..., 0, :] - at[..., 2, :] + at[..., 3, :] - at[..., 1, :]  # (B, k, G) mismatch counts
        in_window = mis_sums[..., -1:].long()  # (B, k, 1)
        key = (local * width + in_window) * k + torch.arange(k, device=local.device).view(1, k, 1)
        return key.topk(r, dim=1, largest=False, sorted=False).indices

    def _log_odds(self, tokens: torch.Tensor, typed: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """(B, C) query alt log-odds at `columns` (C,) of tokens (B, R, M).
        Context cells are taken to be REF or ALT (a panel has no missing alleles)."""
        lo, hi = _left_right_bounds(typed, columns)
        width = typed.numel() + 1
        gaps, which = torch.unique(lo * width + hi, return_inverse=True)  # the columns' distinct evidence
        at_typed = _take_columns(tokens, torch.nonzero(typed).squeeze(1))
        weights, rows = self._weights(at_typed[:, 0], at_typed[:, 1:], gaps // width, gaps % width)
        # each column's vote over its own gap's candidates: their alleles (B, r, C), 1 where ALT (with REF,
        # ALT, MASKED = 0, 1, 2, x & 1 is x == ALT, in a third of the time), times the gap's weights, as a
        # batch of (heads, r) x (r, 1) products over (B, C)
        token_rows = torch.arange(1, tokens.shape[1], device=tokens.device).view(1, -1, 1) if rows is None \
            else 1 + rows.index_select(2, which)
        alt = _take_rows(tokens, token_rows, columns).bitwise_and_(ALT)
        weights = weights.permute(0, 2, 3, 1).index_select(1, which)  # (B, C, heads, r)
        vote = torch.matmul(weights, alt.to(weights.dtype).transpose(1, 2)[..., None]).squeeze(-1)  # (B, C, heads)
        eps = torch.sigmoid(self.smoothing)
        vote = (vote + eps) / (1 + 2 * eps)
        return (torch.log(vote) - torch.log1p(-vote)) @ self.mix + self.bias

    def forward(self, tokens: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        # tokens (B, R, M), typed (M,) bool -> logits (B, R, M): the query row's; 0 for context rows
        out = torch.zeros(tokens.shape, device=tokens.device)
        out[:, 0] = self._log_odds(tokens, typed, torch.arange(tokens.shape[-1], device=tokens.device))
        return out

    def query_logits(self, tokens: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """forward(tokens, typed)[:, 0][:, ~typed], for those columns alone."""
        return self._log_odds(tokens, typed, torch.nonzero(~typed).squeeze(1))
