"""Serving under load: one replica of a continuous-batching engine with chunked prefill.

The engine, as vLLM V1's default scheduler runs it: every iteration runs one token of each running
sequence plus prompt chunks taken first come first served from the waiting queue, up to
`max_num_batched_tokens` tokens, with at most `max_running` sequences admitted (max_num_seqs, or the
KV budget). An iteration lasts the decode step of its running sequences (latency.decode_step at the
mean context) plus the extra time of its prompt chunks (latency.prefill_chunk_work_ms).

This module is the fast model, a queueing approximation; tests/test_serving_oracle.py checks it
against a discrete-event simulation of that scheduler.

  * Decoding sequences N (Little's law): N = lambda (O - 1) T, with the mean iteration
    T = D(N) / (1 - rho_w) and rho_w = lambda E[W] the share of time prompt chunks take. Written in N,
    lambda(N) = N / ((O - 1) D(N) + N E[W]) is explicit, so N(lambda) is an interpolation.
  * Prefill queue: G/G/1 whose service is a prompt's work plus its share of the full iterations a
    backlog gets, S = W + n D(N) / C (C = budget - N prompt tokens per iteration). Utilization
    rho = lambda E[S]; the replica is stable while rho < 1 and N < max_running (the capacity).
    Wait (mean value): a prompt that fits the budget rides one iteration with those that arrived during
    the iteration before (`riders`), holding its share of that decode step, S_ride = W + D / riders (at
    light load the whole step); a backlog drains at the full budget, S. An arrival waits, with
    probability sigma, the rest of the prompt iteration in progress, then the backlog ahead at the full
    rate: mean sigma E[S_ride] / (1 - sigma_S) (ca^2 + cs^2) / (ca^2 + 1); sigma is GI/M/1's waiting
    probability for gamma inter-arrival times of CV ca (`arrival_cv`; rho under Poisson, larger for
    clumped arrivals); the wait is exponential given that it happens.
  * TTFT = own prefill iterations (ceil(n / C) D(N) + W) + either the wait or, for an arrival that does
    not wait, the rest of the decode-only iteration in progress, stretched by the prompts that arrive
    before its iteration starts and ride it (+ the engine's serving overhead).
  * ITL, per token and pooled over requests (as `vllm bench serve` reports it): a mixture of
    pure-decode iterations and iterations carrying prompt chunks (the prompts that arrived during the
    previous iteration, Poisson; the continuation chunks of prompts longer than C); the decode batch a
    token sees is 1 + Poisson(N), which spreads D. Clumped arrivals (ca > 1): the window's P(no arrival)
    is the gamma renewal process's own, the windows that get arrivals get a geometric clump, and a
    two-state chain (prompt-carrying iterations are longer, so a clump's next arrival lands in the next
    one) scales the share of iterations that carry prompts.
  * E2E = TTFT + (O - 1) x mean iteration.
A closed loop (a concurrency c) runs at the rate whose mean number in the system, lambda E[E2E], is c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np

from planner.core.deployment import Deployment
from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.physics.latency import decode_step, prefill_chunk_work_ms

LENGTH_GRID = 32  # equal-mass quantiles that stand for a length distribution
RESIDUAL_POINTS = 8  # equal-mass points of the uniform rest of the iteration in progress
POPULATION_GRID = 160  # decoding-population points that tabulate the decode step
PERCENTILES = (50, 90, 99)
MAX_WINDOW_ARRIVALS = 48
_LOG_FACTORIAL = np.array([math.lgamma(k + 1.0) for k in range(MAX_WINDOW_ARRIVALS + 1)])


@dataclass(frozen=True)
class Workload:
    """The traffic one replica serves and the engine's scheduling limits."""

    prompt_len: float
    output_len: float
    max_running: int
    prompt_len_cv: float = 0.0
    output_len_cv: float = 0.0
    arrival_cv: float = 1.0
    prefix_cache_hit: float = 0.0
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    context: float | None = None  # mean cached context of a decoding sequence; default prompt + output / 2
    ttft_overhead_ms: float = 0.0
    ttft_per_running_ms: float = 0.0  # the frontend's serving cost per other request in flight


@lru_cache(maxsize=256)
def _unit_quantiles(cv: float, n: int) -> tuple[float, ...]:
    """Equal-mass quantiles of a lognormal with mean 1 and coefficient of variation `cv`."""
    if cv <= 0:
        return (1.0,) * n
    sigma = math.sqrt(math.log1p(cv * cv))
    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    values = np.exp(sigma * np.array(z) - sigma * sigma / 2)
    return tuple(values / values.mean())  # the grid keeps the mean exactly


def length_quantiles(mean: float, cv: float, n: int = LENGTH_GRID) -> np.ndarray:
    """Token lengths standing for a fixed (cv 0: one point) or lognormal length distribution, at least 1."""
    if cv <= 0:
        return np.array([max(round(mean), 1)], dtype=float)
    return np.maximum(np.round(mean * np.array(_unit_quantiles(float(cv), n))), 1.0)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz & Stegun 7.1.26 erf, |error| < 1.5e-7); numpy has no erf."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


@dataclass(frozen=True)
class ReplicaModel:
    """Step-time tables of one deployment under one workload; rates are per millisecond inside."""

    workload: Workload
    prompt_tokens: np.ndarray  # length grid (equal mass)
    computed_tokens: np.ndarray  # prompt tokens prefill computes (prefix-cache hits skipped)
    prefill_work_ms: np.ndarray  # extra iteration time of each whole prompt
    output_tokens: np.ndarray  # length grid (equal mass)
    population: np.ndarray  # decoding-population grid N
    decode_ms: np.ndarray  # D(N)
    rate_per_ms: np.ndarray  # lambda(N)
    utilization: np.ndarray  # rho(N) of the prefill queue

    @property
    def decode_steps_per_request(self) -> float:
        return float(np.mean(self.output_tokens - 1.0))

    @property
    def mean_prefill_work_ms(self) -> float:
        return float(np.mean(self.prefill_work_ms))

    def capacity_per_ms(self, max_running: float | np.ndarray | None = None) -> np.ndarray:
        """Saturation rate: where the prefill queue's utilization reaches 1 or N reaches max_running."""
        cap = np.asarray(self.workload.max_running if max_running is None else max_running, dtype=float)
        over = np.nonzero(self.utilization >= 1.0)[0]
        if self.decode_steps_per_request <= 0:  # no decode: the prefill queue alone
            budget = self.workload.max_num_batched_tokens
            service = self.mean_prefill_work_ms + np.mean(self.computed_tokens) * self.decode_ms[0] / budget
            return np.full_like(cap, 1.0 / service)
        if len(over):
            i = over[0]
            if i == 0:
                rho_limit = 0.0
            else:
                u0, u1 = self.utilization[i - 1], self.utilization[i]
                f = (1.0 - u0) / (u1 - u0) if np.isfinite(u1) else 0.0
                rho_limit = float(self.rate_per_ms[i - 1] + f * (self.rate_per_ms[i] - self.rate_per_ms[i - 1]))
        else:
            rho_limit = math.inf
        slot_limit = np.interp(cap, self.population, self.rate_per_ms)
        return np.minimum(slot_limit, rho_limit)


def replica_model(d: Deployment, w: Workload, max_population: int | None = None) -> ReplicaModel:
    """Tabulate the step times once; `max_population` (default `w.max_running`) bounds the N grid."""
    prompts = length_quantiles(w.prompt_len, w.prompt_len_cv)
    outputs = length_quantiles(w.output_len, w.output_len_cv)
    computed = np.maximum(np.round(prompts * (1.0 - w.prefix_cache_hit)), 1.0)
    work = np.asarray(prefill_chunk_work_ms(d, prompts, prompts - computed), dtype=float)
    top = max(float(max_population or w.max_running), 1.0)
    population = np.concatenate([[0.0], np.geomspace(1e-3, top, POPULATION_GRID - 1)])
    context = w.context if w.context is not None else w.prompt_len + w.output_len / 2
    decode = np.asarray(decode_step(d, population, context).total_ms, dtype=float)
    steps = float(np.mean(outputs - 1.0))
    mean_work = float(np.mean(work))
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = population / (steps * decode + population * mean_work) if steps > 0 else np.zeros_like(population)
        chunk = w.max_num_batched_tokens - population
        service = mean_work + float(np.mean(computed)) * decode / chunk
        util = np.where(chunk >= 1.0, rate * service, np.inf)
    return ReplicaModel(w, prompts, computed, work, outputs, population, decode, rate, util)


def riders(rate_per_ms: np.ndarray, iteration_ms: np.ndarray, arrival_cv: float) -> np.ndarray:
    """Mean prompts in an iteration that carries prompts: those that arrived during the previous
    iteration, given at least one did (lambda T / P(N >= 1); Poisson: mu / (1 - e^-mu)). A prompt that
    fits the budget rides with them and pays its share of that iteration's decode step, not n / C of it:
    at light load each prompt holds a whole decode step."""
    window = np.asarray(rate_per_ms * iteration_ms, dtype=float)
    some = 1.0 - window_counts(np.asarray(rate_per_ms, dtype=float), np.asarray(iteration_ms, dtype=float),
                               arrival_cv, 1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(some > 1e-12, np.maximum(window / some, 1.0), 1.0)


@dataclass(frozen=True)
class LoadPoint:
    """The replica's state at a request rate (arrays broadcast over rates)."""

    rate_per_ms: np.ndarray
    population: np.ndarray  # N, mean decoding sequences
    decode_ms: np.ndarray  # D(N)
    decode_spread_ms: np.ndarray  # spread of D over the batch a token sees
    iteration_ms: np.ndarray  # mean iteration
    chunk_tokens: np.ndarray  # prompt tokens a full iteration carries
    utilization: np.ndarray  # rho of the prefill queue
    prefill_share: np.ndarray  # rho_w, share of GPU time on prompts
    wait_mean_ms: np.ndarray
    stable: np.ndarray
    seen: np.ndarray | float = 1.0  # share of the others an arrival finds ((c - 1) / c in a closed loop of c)
    wait_probability: np.ndarray | float = 0.0  # P(an arrival waits); rho under Poisson arrivals


def waiting_probability(utilization: np.ndarray, arrival_cv: float) -> np.ndarray:
    """P(an arriving prompt waits) in a GI/M/1 queue with gamma inter-arrival times of CV `arrival_cv`:
    the root sigma in (0, 1) of sigma = A*(mu (1 - sigma)), A*(s) = (1 + theta s)^-k the gamma's Laplace
    transform (k = 1 / ca^2, theta mu = ca^2 / rho). Poisson gives sigma = rho; clumped arrivals
    (ca > 1) wait far more often than rho says (ca 2 at rho 0.1: sigma 0.46), since most of a clump's
    arrivals land while the one before is still in prefill."""
    rho = np.clip(np.asarray(utilization, dtype=float), 1e-12, 1.0 - 1e-12)
    ca2 = float(arrival_cv) ** 2
    if abs(ca2 - 1.0) < 1e-9:
        return rho

    def transform(sigma):
        if ca2 < 1e-9:  # deterministic arrivals: e^(-s / lambda)
            return np.exp(-(1.0 - sigma) / rho)
        return (1.0 + ca2 * (1.0 - sigma) / rho) ** (-1.0 / ca2)

    lo, hi = np.zeros_like(rho), np.full_like(rho, 1.0 - 1e-9)
    for _ in range(24):  # sigma - A*(.) is < 0 below the root and > 0 between it and 1 (2^-24: plenty)
        mid = 0.5 * (lo + hi)
        below = mid < transform(mid)
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def load_point(m: ReplicaModel, rate_per_ms, max_running=None, seen: float = 1.0) -> LoadPoint:
    """`seen`: an arrival in a closed loop of c clients finds the other c - 1 (the arrival theorem), so it
    sees (c - 1) / c of the mean decoding population and queue; an open loop's arrival sees all of it."""
    lam = np.asarray(rate_per_ms, dtype=float)
    w = m.workload
    cap = m.capacity_per_ms(max_running)
    n = np.interp(lam, m.rate_per_ms, m.population) if m.decode_steps_per_request > 0 else np.zeros_like(lam)
    d = np.interp(n, m.population, m.decode_ms)
    slope = np.interp(n + 1.0, m.population, m.decode_ms) - d
    spread = np.abs(slope) * np.sqrt(n)
    d_token = d + slope  # a token sees 1 + Poisson(N) sequences in its batch
    share = lam * m.mean_prefill_work_ms
    chunk = np.maximum(w.max_num_batched_tokens - n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        iteration = np.where(share < 1.0, d / (1.0 - share), np.inf)
    # Prompts that fit the budget ride an iteration with the others that arrived during the one before;
    # each holds its share of that iteration's decode step (S_ride = W + D / riders; at light load the
    # whole step), while a backlog drains at the full budget (S_full = W + n D / C, which sets capacity).
    # Mean-value wait: an arrival waits the rest of the prompt iteration in progress (with probability
    # the time share of those, rho_ride = lambda E[S_ride]; residual E[S_ride] (1 + cs^2) / 2), then the
    # backlog ahead at the full rate: Wq = rho_ride R / (1 - rho_full). Clumped arrivals: both shares as
    # GI/M/1 waiting probabilities sigma (gamma arrivals; sigma = rho under Poisson), (ca^2 + cs^2) / 2
    # for (1 + cs^2) / 2 over (ca^2 + 1) / 2.
    together = riders(lam, iteration, w.arrival_cv)
    full = m.prefill_work_ms + m.computed_tokens * (d / chunk)[..., None]
    ride = m.prefill_work_ms + d[..., None] * np.maximum(m.computed_tokens / chunk[..., None], 1.0 / together[..., None])
    rho = lam * full.mean(axis=-1)
    mean_s = ride.mean(axis=-1)
    cs2 = ride.var(axis=-1) / np.maximum(mean_s, 1e-12) ** 2
    # at capacity itself is not below it: a rate given as the capacity may come back a rounding under it
    stable = (lam < cap * (1.0 - 1e-9)) & (rho < 1.0) & (share < 1.0)
    ca2 = w.arrival_cv ** 2
    sigma = waiting_probability(np.minimum(lam * mean_s, 1.0), w.arrival_cv)
    sigma_full = waiting_probability(np.minimum(rho, 1.0), w.arrival_cv)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1.0, sigma / (1.0 - sigma_full) * (ca2 + cs2) / (ca2 + 1.0) * mean_s, np.inf)
    return LoadPoint(lam, n, d_token, spread, iteration, chunk, rho, share, wait, stable, seen, sigma)


def _ttft_parts(m: ReplicaModel, p: LoadPoint) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT as a mixture: own iterations plus, for an arrival that does not wait (1 - P(wait)), the rest
    of the decode-only iteration in progress; for one that waits, an exponential wait (GI/M/1's form;
    it holds the rest of the prompt iteration in progress). Returns the parts' offsets, weights and
    exponential means (0: none), shape (..., LENGTH_GRID * (RESIDUAL_POINTS + 2))."""
    own = np.ceil(m.computed_tokens / p.chunk_tokens[..., None]) * p.decode_ms[..., None] + m.prefill_work_ms
    waits = np.clip(np.asarray(p.wait_probability) * p.seen, 0.0, 1.0)
    busy = 1.0 - np.exp(-p.population * p.seen)  # an arrival finds a decode iteration in progress
    u = (np.arange(RESIDUAL_POINTS) + 0.5) / RESIDUAL_POINTS
    zero = np.zeros_like(p.iteration_ms)[..., None]
    # Prompts arriving between this one and the start of its iteration ride it too (up to the budget),
    # each adding its work: every ms before the iteration starts costs 1 + lambda E[W] (the prefill share).
    fits = np.maximum(p.chunk_tokens / float(np.mean(m.computed_tokens)) - 1.0, 0.0)
    stretch = 1.0 + p.prefill_share * np.minimum(fits, 1.0) * p.seen
    residual = np.concatenate([zero, zero, (p.decode_ms * stretch)[..., None] * u], axis=-1)
    weight = np.concatenate([waits[..., None], ((1.0 - busy) * (1.0 - waits))[..., None],
                             np.repeat((busy * (1.0 - waits) / RESIDUAL_POINTS)[..., None], RESIDUAL_POINTS, axis=-1)],
                            axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        conditional = np.where(waits > 0, p.wait_mean_ms * p.seen / np.maximum(waits, 1e-300), 0.0)
    means = np.concatenate([conditional[..., None], np.zeros_like(residual[..., 1:])], axis=-1)
    parts = own[..., :, None] + residual[..., None, :]
    weights = np.broadcast_to(weight[..., None, :] / len(m.computed_tokens), parts.shape)
    tails = np.broadcast_to(means[..., None, :], parts.shape)
    shape = parts.shape[:-2] + (-1,)
    frontend = m.workload.ttft_overhead_ms + m.workload.ttft_per_running_ms * p.population * p.seen
    return (parts.reshape(shape) + np.asarray(frontend)[..., None], weights.reshape(shape),
            tails.reshape(shape))


def ttft_distribution(m: ReplicaModel, p: LoadPoint):
    """t -> P(TTFT <= t) at the load point (its parts computed once); t broadcasts against its shape."""
    parts, weights, tails = _ttft_parts(m, p)
    scale = np.maximum(tails, 1e-9)

    def cdf(t_ms) -> np.ndarray:
        x = np.asarray(t_ms, dtype=float)[..., None] - parts
        with np.errstate(over="ignore"):
            inside = np.where(x < 0, 0.0, -np.expm1(-np.maximum(x, 0.0) / scale))
        return np.sum(weights * np.where(tails > 0, inside, x >= 0), axis=-1)
    return cdf


def ttft_cdf(m: ReplicaModel, p: LoadPoint, t_ms) -> np.ndarray:
    """P(TTFT <= t); `t_ms` broadcasts against the load point's shape."""
    return ttft_distribution(m, p)(t_ms)


def _lower_gamma_regularized(a: float, x: np.ndarray, terms: int = 80) -> np.ndarray:
    """P(a, x) by its power series x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1)...(a + n)); numpy has no
    incomplete gamma, and the windows here keep x below a few tens (the series then converges)."""
    given = np.maximum(np.asarray(x, dtype=float), 0.0)
    # An unstable point's window is infinite: P(a, inf) = 1 exactly. The series runs on finite x only
    # (inf - inf in the log front would be NaN, and numpy would warn); a NaN x stays NaN.
    finite = np.isfinite(given)
    x = np.where(finite, given, 0.0)
    term = np.ones_like(x)
    total = np.ones_like(x)
    for n in range(1, terms):
        term = term * x / (a + n)
        total = total + term
        if n % 4 == 0 and not np.any(term > 1e-10 * total):  # converged everywhere
            break
    log_front = a * np.log(np.maximum(x, 1e-300)) - x - math.lgamma(a + 1.0)
    series = np.where(x > 0, np.minimum(np.exp(log_front) * total, 1.0), 0.0)
    return np.where(finite, series, np.where(given == np.inf, 1.0, np.nan))


def gap_cdf(rate_per_ms: np.ndarray, t_ms: np.ndarray, arrival_cv: float) -> np.ndarray:
    """P(inter-arrival time <= t) for gamma gaps of mean 1 / rate and CV `arrival_cv`."""
    lam_t = np.asarray(rate_per_ms, dtype=float) * np.asarray(t_ms, dtype=float)
    ca2 = float(arrival_cv) ** 2
    if ca2 < 1e-6:
        return (lam_t >= 1.0).astype(float)
    if abs(ca2 - 1.0) < 1e-9:
        return -np.expm1(-lam_t)
    return _lower_gamma_regularized(1.0 / ca2, lam_t / ca2)


def window_counts(rate_per_ms: np.ndarray, window_ms: np.ndarray, arrival_cv: float, kmax: int) -> np.ndarray:
    """P(k prompt arrivals in an iteration window), k = 0..kmax, renormalised. Poisson arrivals: Poisson.
    Gamma inter-arrival times of CV ca > 1 (clumps): P(0) exact for the stationary renewal process,
    1 - lambda E[min(gap, window)], and the windows that do get arrivals get them in clumps, a geometric
    count on 1, 2, ... keeping the mean lambda x window."""
    mu = np.maximum(np.asarray(rate_per_ms * window_ms, dtype=float), 1e-300)[..., None]
    k = np.arange(kmax + 1, dtype=float)
    ca2 = float(arrival_cv) ** 2
    if ca2 <= 1.0 + 1e-9:
        # an unstable point's window is infinite: no Poisson count there (NaN, as 0 x log(inf) gave), and
        # log is only ever taken of a finite positive mean
        finite = np.isfinite(mu)
        safe = np.where(finite, mu, 1.0)
        pk = np.where(finite, np.exp(k * np.log(safe) - safe - _LOG_FACTORIAL[: kmax + 1]), np.nan)
        return pk / np.maximum(pk.sum(axis=-1, keepdims=True), 1e-300)
    shape = 1.0 / ca2
    x = (np.asarray(rate_per_ms, dtype=float) * shape * np.asarray(window_ms, dtype=float))[..., None]  # window / theta
    lower = _lower_gamma_regularized(shape, x)
    survival = 1.0 - lower
    # P(a + 1, x) = P(a, x) - x^a e^-x / Gamma(a + 1); the front is 0 at an infinite window (on finite x only)
    safe_x = np.where(np.isfinite(x), x, 0.0)
    front = np.where(np.isfinite(x), np.exp(shape * np.log(np.maximum(safe_x, 1e-300)) - safe_x
                                            - math.lgamma(shape + 1.0)), 0.0)
    below = np.clip(lower - np.where(x > 0, front, 0.0), 0.0, 1.0)  # E[gap; gap < window] / E[gap]
    # P(N >= 1) = lambda E[min(gap, window)]; 1 in an infinite window (where inf x 0 would be NaN)
    finite_mu = np.isfinite(mu)
    busy = np.where(finite_mu, np.clip(np.where(finite_mu, mu, 0.0) * survival + below, 1e-300, 1.0), 1.0)
    clump = np.maximum(mu / busy, 1.0)  # mean count of a window that has arrivals
    ratio = 1.0 - 1.0 / clump
    pk = np.where(k[1:] >= 1, busy / clump * ratio ** (k[1:] - 1.0), 0.0)
    pk = np.concatenate([1.0 - busy, pk], axis=-1)
    return pk / np.maximum(pk.sum(axis=-1, keepdims=True), 1e-300)


def _itl_atoms(m: ReplicaModel, p: LoadPoint) -> tuple[np.ndarray, np.ndarray]:
    """Extra time an iteration's prompt chunks add, and the share of tokens that see it."""
    n = m.computed_tokens
    per_token = m.prefill_work_ms / n
    chunk = p.chunk_tokens[..., None]
    first = np.minimum(n, chunk)
    continuations = np.maximum(np.ceil(n / chunk) - 1.0, 0.0)  # full chunks after the first
    window = p.rate_per_ms * p.iteration_ms
    full_share = np.minimum(1.0, window * continuations.mean(axis=-1))
    full_extra = (chunk * per_token).mean(axis=-1)
    # prompts arriving during the previous iteration: Poisson count, their first chunks together
    top = float(np.max(window, initial=0.0))
    dispersion = max(m.workload.arrival_cv ** 2, 1.0)
    kmax = min(MAX_WINDOW_ARRIVALS, int(math.ceil(top + 8.0 * math.sqrt(top * dispersion) + 8.0 * dispersion)))
    pk = window_counts(p.rate_per_ms, p.iteration_ms, m.workload.arrival_cv, kmax)
    k = np.arange(kmax + 1, dtype=float)
    mean_first_tokens = first.mean(axis=-1, keepdims=True)
    mean_first_work = (first * per_token).mean(axis=-1, keepdims=True)
    tokens_k = np.minimum(k * mean_first_tokens, chunk)
    extra_k = tokens_k * mean_first_work / np.maximum(mean_first_tokens, 1e-12)
    one = first * per_token  # a single arrival: its own prompt's first chunk
    # Which iterations carry prompts under clumped arrivals: a two-state chain. After a decode-only
    # iteration (window D) the next carries prompts with the window's P(N >= 1); after one carrying
    # prompts (window D + W, W their extra time), with P(next gap < D + W), the inter-arrival CDF: clumps
    # chain prompt-carrying iterations. The chain's ratio to its Poisson self scales the Poisson window's
    # share, so Poisson arrivals keep the window count and the model is continuous in `arrival_cv`.
    if m.workload.arrival_cv > 1.0:
        rate = np.asarray(p.rate_per_ms, dtype=float)
        some = np.maximum(pk[..., 1:].sum(axis=-1), 1e-300)
        after_prompts = p.decode_ms + (pk[..., 1:] * extra_k[..., 1:]).sum(axis=-1) / some

        def chain(cv: float) -> np.ndarray:
            enter = 1.0 - window_counts(rate, p.decode_ms, cv, 1)[..., 0]
            return enter / np.maximum(enter + 1.0 - gap_cdf(rate, after_prompts, cv), 1e-300)

        poisson_share = 1.0 - window_counts(rate, p.iteration_ms, 1.0, 1)[..., 0]
        carrying = np.minimum(poisson_share * chain(m.workload.arrival_cv) / np.maximum(chain(1.0), 1e-300), 1.0)
        pk = np.concatenate([(1.0 - carrying)[..., None], pk[..., 1:] * (carrying / some)[..., None]], axis=-1)
    atoms = np.concatenate([full_extra[..., None], extra_k[..., :1], one, extra_k[..., 2:]], axis=-1)
    lone = pk[..., 1:2] / one.shape[-1]
    weights = np.concatenate([full_share[..., None], (1 - full_share[..., None]) * pk[..., :1],
                              (1 - full_share[..., None]) * np.broadcast_to(lone, one.shape),
                              (1 - full_share[..., None]) * pk[..., 2:]], axis=-1)
    return atoms, weights


def itl_distribution(m: ReplicaModel, p: LoadPoint):
    """t -> P(ITL <= t), pooled over tokens, at the load point (its atoms computed once)."""
    atoms, weights = _itl_atoms(m, p)
    mean = p.decode_ms[..., None] + atoms
    spread = np.maximum(p.decode_spread_ms[..., None], 1e-6 * mean)

    def cdf(t_ms) -> np.ndarray:
        t = np.asarray(t_ms, dtype=float)[..., None]
        return np.sum(weights * _normal_cdf((t - mean) / spread), axis=-1)
    return cdf


def itl_cdf(m: ReplicaModel, p: LoadPoint, t_ms) -> np.ndarray:
    return itl_distribution(m, p)(t_ms)


def e2e_cdf(m: ReplicaModel, p: LoadPoint, t_ms) -> np.ndarray:
    """P(E2E <= t): TTFT plus (O - 1) mean iterations, over the output-length grid."""
    decode = (m.output_tokens - 1.0) * p.iteration_ms[..., None]
    t = np.asarray(t_ms, dtype=float)[..., None] - decode
    return np.mean(ttft_cdf(m, _expand_point(p), t), axis=-1)


def _expand_point(p: LoadPoint) -> LoadPoint:
    return LoadPoint(*(np.asarray(v)[..., None] for v in (
        p.rate_per_ms, p.population, p.decode_ms, p.decode_spread_ms, p.iteration_ms, p.chunk_tokens,
        p.utilization, p.prefill_share, p.wait_mean_ms, p.stable, p.seen, p.wait_probability)))


def quantile(cdf, probability, high_ms, grid: int = 32, refine: int = 14) -> np.ndarray:
    """The t where the monotone cdf(t) reaches each `probability`: a grid on [0, high] (grown until it
    covers them), then bisection inside the bracketing cell."""
    prob = np.atleast_1d(np.asarray(probability, dtype=float))
    high = float(high_ms)
    for _ in range(30):
        ts = np.linspace(0.0, high, grid + 1)
        values = cdf(ts)
        if values[-1] >= prob.max():
            break
        high *= 4.0
    cell = np.clip(np.searchsorted(values, prob), 1, grid)
    lo, hi = ts[cell - 1], ts[cell]
    for _ in range(refine):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < prob
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Percentiles:
    p50: float | None
    p90: float | None
    p99: float | None

    def at(self, percentile: int) -> float | None:
        return {50: self.p50, 90: self.p90, 99: self.p99}[percentile]


NO_PERCENTILES = Percentiles(None, None, None)


def _percentiles(cdf, high: float) -> Percentiles:
    q = quantile(cdf, np.array(PERCENTILES) / 100.0, max(high, 1e-3))
    return Percentiles(*(float(v) for v in q))


def latency_percentiles(m: ReplicaModel, p: LoadPoint) -> tuple[Percentiles, Percentiles, Percentiles]:
    """TTFT, ITL and E2E percentiles at a scalar load point (None where it is not stable)."""
    if not bool(p.stable):
        return NO_PERCENTILES, NO_PERCENTILES, NO_PERCENTILES
    first = float(np.max(m.prefill_work_ms) + p.iteration_ms + p.wait_mean_ms + 1.0)
    ttft = _percentiles(ttft_distribution(m, p), first)
    itl = _percentiles(itl_distribution(m, p), float(p.iteration_ms * 2))
    if np.ptp(m.output_tokens) == 0:  # fixed output length: E2E is TTFT shifted by the decode
        shift = float((m.output_tokens[0] - 1.0) * p.iteration_ms)
        e2e = Percentiles(*(v + shift for v in (ttft.p50, ttft.p90, ttft.p99)))  # type: ignore[operator]
    else:
        e2e = _percentiles(lambda t: e2e_cdf(m, p, t), first + float(np.max(m.output_tokens) * p.iteration_ms))
    return ttft, itl, e2e


def mean_ttft_ms(m: ReplicaModel, p: LoadPoint) -> np.ndarray:
    parts, weights, tails = _ttft_parts(m, p)
    return np.sum((parts + tails) * weights, axis=-1)


def mean_itl_ms(m: ReplicaModel, p: LoadPoint) -> np.ndarray:
    """Mean ITL pooled over tokens: the mixture itl_distribution draws, each component at D + its atom."""
    atoms, weights = _itl_atoms(m, p)
    return p.decode_ms + np.sum(weights * atoms, axis=-1) / np.maximum(np.sum(weights, axis=-1), 1e-300)


def rate_for_concurrency(m: ReplicaModel, concurrency: float, max_running=None) -> tuple[float, bool]:
    """Closed loop: the rate whose mean number in the system, lambda (TTFT + (O - 1) T), is the
    concurrency, and whether the replica holds it below capacity."""
    cap = float(m.capacity_per_ms(max_running))
    if not cap > 0:
        return 0.0, False

    seen = max(concurrency - 1.0, 0.0) / max(concurrency, 1.0)

    def in_system(rates):
        p = load_point(m, rates, max_running, seen)
        n = rates * (mean_ttft_ms(m, p) + m.decode_steps_per_request * p.iteration_ms)
        return np.where(np.isfinite(n) & p.stable, n, np.inf)

    rates = cap * np.concatenate([np.geomspace(1e-6, 0.9, 120), 1.0 - np.geomspace(0.1, 1e-6, 120)])
    counts = in_system(rates)
    above = np.nonzero(counts >= concurrency)[0]
    if len(above) == 0:
        return cap, False  # more clients than the replica holds below saturation: the queue grows
    if above[0] == 0:
        lo, hi = 0.0, float(rates[0])
    else:
        lo, hi = float(rates[above[0] - 1]), float(rates[above[0]])
    for _ in range(20):  # the grid cell is 1/120 of capacity: 2^-20 of it is plenty
        mid = 0.5 * (lo + hi)
        if float(in_system(np.asarray(mid))) < concurrency:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi), True


def meets_objective(m: ReplicaModel, p: LoadPoint, percentile: int, ttft_ms: float | None,
                    itl_ms: float | None) -> np.ndarray:
    """Whether the percentile of TTFT and of ITL at each load point is within the objective."""
    prob = percentile / 100.0
    ok = np.asarray(p.stable, dtype=bool).copy()
    if ttft_ms is not None:
        ok &= ttft_cdf(m, p, ttft_ms) >= prob
    if itl_ms is not None:
        ok &= itl_cdf(m, p, itl_ms) >= prob
    return ok


def goodput_per_ms(m: ReplicaModel, percentile: int, ttft_ms: float | None, itl_ms: float | None,
                   max_running=None, grid: int = 48, refine: int = 10) -> float:
    """Highest rate that meets the objective at the percentile (0 when even a trickle does not).
    Latency grows with the rate: a grid of rates up to capacity at once, then bisection in the cell."""
    cap = float(m.capacity_per_ms(max_running))
    if not cap > 0:
        return 0.0
    rates = cap * np.concatenate([[1e-6], np.linspace(1.0 / grid, 1.0, grid) * (1.0 - 1e-9)])
    ok = meets_objective(m, load_point(m, rates, max_running), percentile, ttft_ms, itl_ms)
    if not ok[0]:
        return 0.0
    last = int(np.argmin(ok)) - 1 if not ok.all() else len(rates) - 1
    lo, hi = float(rates[last]), float(rates[min(last + 1, len(rates) - 1)])
    if last == len(rates) - 1:
        return lo
    for _ in range(refine):
        mid = 0.5 * (lo + hi)
        if bool(meets_objective(m, load_point(m, mid, max_running), percentile, ttft_ms, itl_ms)):
            lo = mid
        else:
            hi = mid
    return lo


def capacity_and_goodput(m: ReplicaModel, caps, percentile: int, ttft_ms: float | None,
                         itl_ms: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Capacity and goodput (per ms) for each cap on running sequences. Latency at a rate does not depend
    on the cap (only stability does), so a cap's goodput is the uncapped one, limited by its capacity."""
    capacity = np.asarray(m.capacity_per_ms(np.asarray(caps, dtype=float)), dtype=float)
    best = goodput_per_ms(m, percentile, ttft_ms, itl_ms)
    return capacity, np.minimum(best, capacity * (1.0 - 1e-9))


@dataclass(frozen=True)
class Objective:
    """A latency objective at a percentile (either bound may be absent)."""

    ttft_ms: float | None
    itl_ms: float | None
    percentile: int = 90


@dataclass(frozen=True)
class ServingPoint:
    """One replica at an operating point: rates per second, latencies in ms, None where not stable."""

    mode: Literal["concurrency", "request_rate"]  # closed loop or open loop
    request_rate: float
    concurrency: float | None
    stable: bool
    max_request_rate: float
    goodput_request_rate: float | None
    prefill_share: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    decoding_sequences: float
    max_running: int
    ttft_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles
    slo: Objective | None
    # extensions: means beside the percentiles, the mean iteration (every decode step a request sees, on
    # average), decode steps per request, and a closed loop held at capacity by more clients than it runs
    ttft_mean_ms: float | None = None
    itl_mean_ms: float | None = None
    e2e_mean_ms: float | None = None
    mean_iteration_ms: float | None = None
    decode_steps_per_request: float = 0.0
    saturated: bool = False
    # a closed-loop benchmark's own per-request TPOT (planner.serving.benchmark_client.at_benchmark)
    tpot_ms: Percentiles | None = None
    tpot_mean_ms: float | None = None


def _point(m: ReplicaModel, mode: Literal["concurrency", "request_rate"], rate_per_ms: float, concurrency: float | None, stable: bool,
           slo: Objective | None) -> ServingPoint:
    seen = 1.0 if concurrency is None else max(concurrency - 1.0, 0.0) / max(concurrency, 1.0)
    p = load_point(m, rate_per_ms, seen=seen)
    # a closed loop with more clients than the replica runs below saturation is not unstable: its queue
    # is bounded by the clients, and it serves at capacity (the latencies grow with the clients)
    saturated = mode == "concurrency" and not stable and rate_per_ms > 0
    stable = stable and bool(p.stable)
    ttft, itl, e2e = latency_percentiles(m, p) if stable else (NO_PERCENTILES,) * 3
    means: tuple[float | None, ...] = (None, None, None, None)
    if stable:
        ttft_mean = float(mean_ttft_ms(m, p))
        iteration = float(p.iteration_ms)
        means = (ttft_mean, float(mean_itl_ms(m, p)), ttft_mean + m.decode_steps_per_request * iteration, iteration)
    if concurrency is None and stable:
        concurrency = float(rate_per_ms * (mean_ttft_ms(m, p) + m.decode_steps_per_request * p.iteration_ms))
    goodput = None
    if slo is not None and (slo.ttft_ms is not None or slo.itl_ms is not None):
        goodput = float(goodput_per_ms(m, slo.percentile, slo.ttft_ms, slo.itl_ms)) * 1000.0
    rate_s = rate_per_ms * 1000.0
    return ServingPoint(
        mode=mode, request_rate=rate_s, concurrency=concurrency, stable=stable,
        max_request_rate=float(m.capacity_per_ms()) * 1000.0, goodput_request_rate=goodput,
        prefill_share=float(p.prefill_share), output_tokens_per_s=rate_s * float(np.mean(m.output_tokens)),
        total_tokens_per_s=rate_s * float(np.mean(m.output_tokens) + np.mean(m.prompt_tokens)),
        decoding_sequences=float(p.population), max_running=m.workload.max_running,
        ttft_ms=ttft, itl_ms=itl, e2e_ms=e2e, slo=slo, ttft_mean_ms=means[0], itl_mean_ms=means[1],
        e2e_mean_ms=means[2], mean_iteration_ms=means[3], decode_steps_per_request=m.decode_steps_per_request,
        saturated=saturated)


def serve_at_rate(d: Deployment, w: Workload, request_rate_per_s: float, slo: Objective | None = None,
                  max_population: int | None = None) -> ServingPoint:
    """Open loop: requests arrive at `request_rate_per_s` on this replica."""
    m = replica_model(d, w, max_population)
    return _point(m, "request_rate", request_rate_per_s / 1000.0, None, True, slo)


def serve_at_concurrency(d: Deployment, w: Workload, concurrency: float, slo: Objective | None = None,
                         max_population: int | None = None) -> ServingPoint:
    """Closed loop: `concurrency` clients, each sending its next request when the last one ends."""
    m = replica_model(d, w, max_population)
    rate, held = rate_for_concurrency(m, concurrency)
    return _point(m, "concurrency", rate, float(concurrency), held, slo)
