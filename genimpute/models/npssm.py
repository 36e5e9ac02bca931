"""NPSSM backbone (non-parametric state-space model): bidirectional Mamba
along the variants of each haplotype (SSM_attr), then along the haplotypes of
each variant (SSM_data), then a feed-forward block; pre-LayerNorm residuals.

Rows have an order here: row 0 is the query, then its context nearest first
(genimpute.windows.nearest_haplotypes returns them so), as the papers' nearest-
first context. Each bidirectional block runs a Mamba2-style selective scan
(scalar decay per head) forwards and over the reversed sequence; the two
directions share their input and output projections (Caduceus' BiMamba) and
have their own convolution, step sizes and decays.

On CPU the scan is computed in chunks from matrix products (`chunked_scan`);
`reference_scan` is the step-by-step recurrence it is tested against. On CUDA
with `mamba_ssm` installed its Triton kernel is used instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genimpute.models.blocks import AxialBackbone, AxialConfig

SCAN_CHUNK = 32  # sequence positions per chunk of the CPU scan
_EXPAND, _HEAD_DIM, _CONV = 2, 16, 4


def _scan_heads(inner: int) -> int:
    """Heads of a scan over `inner` channels: one per _HEAD_DIM of them, at least one."""
    return max(1, inner // _HEAD_DIM)


@dataclass(frozen=True)
class NPSSMConfig(AxialConfig):
    """The `npssm` backbone's settings. Its scans have heads of their own
    (one per 16 channels), so it takes no `heads`."""

    name = "npssm"
    state: int = 16  # S: state size of each selective scan

    def __post_init__(self):
        super().__post_init__()
        self.require_at_least(state=1)
        inner = _EXPAND * self.dim
        if inner % _scan_heads(inner):
            raise ValueError(f"npssm dim: expected {_EXPAND} x dim to split into {_scan_heads(inner)} equal scan "
                             f"heads; found {self.dim}")


def reference_scan(x, dt, a, b, c):
    """Step-by-step selective scan: h_t = exp(dt_t a) h_{t-1} + dt_t x_t b_t^T,
    y_t = h_t c_t. x (N, L, H, P), dt (N, L, H) > 0, a (H,) < 0, b and c
    (N, L, S) -> y (N, L, H, P)."""
    n, length, h, p = x.shape
    state = x.new_zeros(n, h, p, b.shape[-1])
    ys = []
    for t in range(length):
        decay = torch.exp(dt[:, t] * a)[..., None, None]  # (N, H, 1, 1)
        state = decay * state + (dt[:, t, :, None] * x[:, t])[..., None] * b[:, t, None, None, :]
        ys.append(torch.einsum("nhps,ns->nhp", state, c[:, t]))
    return torch.stack(ys, dim=1)


def chunked_scan(x, dt, a, b, c, chunk: int = SCAN_CHUNK):
    """The same scan from matrix products: within each chunk of `chunk`
    positions as a causal, decay-weighted attention-like product; across
    chunks through the state carried from one chunk to the next."""
    n, length, h, p = x.shape
    chunk = min(chunk, length)
    pad = -length % chunk
    if pad:  # trailing positions with dt = 0 change nothing before them
        x, dt, b, c = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, b, c))
    nc = x.shape[1] // chunk
    # work in (N, H, nc, Q, .) layout, so every product below is a batched matmul
    xdt = (x * dt[..., None]).reshape(n, nc, chunk, h, p).permute(0, 3, 1, 2, 4)  # (N, H, nc, Q, P)
    log_decay = (dt * a).reshape(n, nc, chunk, h).permute(0, 3, 1, 2).cumsum(-1)  # (N, H, nc, Q)
    b, c = b.reshape(n, 1, nc, chunk, -1), c.reshape(n, 1, nc, chunk, -1)  # (N, 1, nc, Q, S)

    # within chunks: y_u = sum_{t<=u} (c_u . b_t) exp(cum_u - cum_t) xdt_t
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    gaps = (log_decay[..., :, None] - log_decay[..., None, :]).masked_fill(~causal, -math.inf)
    y = (torch.exp(gaps) * (c @ b.transpose(-1, -2))) @ xdt

    # each chunk's own contribution to the state at its end, then the state entering each chunk
    to_end = torch.exp(log_decay[..., -1:] - log_decay)[..., None]  # (N, H, nc, Q, 1)
    chunk_states = (xdt * to_end).transpose(-1, -2) @ b  # (N, H, nc, P, S)
    chunk_decay = torch.exp(log_decay[..., -1])[..., None, None]  # (N, H, nc, 1, 1)
    state = torch.zeros_like(chunk_states[:, :, 0])
    entering = []
    for i in range(nc):
        entering.append(state)
        state = chunk_decay[:, :, i] * state + chunk_states[:, :, i]
    entering = torch.stack(entering, dim=2)  # (N, H, nc, P, S)
    y = y + (c @ entering.transpose(-1, -2)) * torch.exp(log_decay)[..., None]
    return y.permute(0, 2, 3, 1, 4).reshape(n, nc * chunk, h, p)[:, :length]


def selective_scan(x, dt, a, b, c):
    if x.is_cuda:
        try:  # imported here: mamba_ssm loads Triton at import and has no CPU path
            from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
        except ImportError:
            pass
        else:
            return mamba_chunk_scan_combined(x, dt, a, b[:, :, None], c[:, :, None], chunk_size=64)
    return chunked_scan(x, dt, a, b, c)


class _Direction(nn.Module):
    """What one direction of a BiMamba block owns: causal depthwise
    convolution, step-size bias, decay rates and skip weights."""

    def __init__(self, inner: int, state: int, heads: int):
        super().__init__()
        self.split = [inner, state, state]
        channels = inner + 2 * state
        self.conv = nn.Conv1d(channels, channels, _CONV, groups=channels, padding=_CONV - 1)
        # step sizes start spread over [1e-3, 1e-1], as in Mamba
        dt = torch.exp(torch.rand(heads) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, heads + 1, dtype=torch.float32)))
        self.skip = nn.Parameter(torch.ones(heads))

    def forward(self, xbc: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        # xbc (N, L, inner + 2S), dt (N, L, H) -> (N, L, inner)
        length = xbc.shape[1]
        xbc = F.silu(self.conv(xbc.transpose(1, 2))[..., :length].transpose(1, 2))
        x, b, c = xbc.split(self.split, dim=-1)
        heads = dt.shape[-1]
        x = x.reshape(*x.shape[:2], heads, -1)
        y = selective_scan(x, F.softplus(dt + self.dt_bias), -torch.exp(self.a_log), b, c)
        return (y + self.skip[:, None] * x).flatten(2)


class BiMamba(nn.Module):
    """(N, L, D) -> (N, L, D): pre-LayerNorm residual bidirectional Mamba2 block."""

    def __init__(self, dim: int, state: int):
        super().__init__()
        self.inner, self.state = _EXPAND * dim, state
        self.heads = _scan_heads(self.inner)
        self.norm = nn.LayerNorm(dim)
        # gate z, then x, b, c for the scan, then one step size per head
        self.in_proj = nn.Linear(dim, 2 * self.inner + 2 * state + self.heads)
        self.forward_dir = _Direction(self.inner, state, self.heads)
        self.reverse_dir = _Direction(self.inner, state, self.heads)
        self.out_norm = nn.LayerNorm(self.inner)
        self.out_proj = nn.Linear(self.inner, dim)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        z, xbc, dt = self.in_proj(self.norm(u)).split(
            [self.inner, self.inner + 2 * self.state, self.heads], dim=-1)
        y = self.forward_dir(xbc, dt) + self.reverse_dir(xbc.flip(1), dt.flip(1)).flip(1)
        return u + self.out_proj(self.out_norm(y) * F.silu(z))


class NPSSM(AxialBackbone):
    def __init__(self, config: NPSSMConfig):
        super().__init__(config, lambda: BiMamba(config.dim, config.state), lambda: BiMamba(config.dim, config.state))

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        b, r, m, d = x.shape
        for along_variants, along_haplotypes, ffn in self.layers:
            x = along_variants(x.reshape(b * r, m, d)).reshape(b, r, m, d)
            x = along_haplotypes(x.transpose(1, 2).reshape(b * m, r, d)).reshape(b, m, r, d).transpose(1, 2)
            x = ffn(x)
        return x
