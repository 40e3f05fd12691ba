"""Serving under load: one replica of a continuous-batching engine with chunked prefill.

The engine, as vLLM V1's default scheduler runs it: every iteration runs one token of each running sequence
plus prompt chunks taken first come first served from the waiting queue, up to `max_num_batched_tokens`
tokens, with at most `max_running` sequences admitted (max_num_seqs, or the KV budget). An iteration lasts the
decode step of its running sequences (latency.decode_step at the mean context) plus the extra time of its
prompt chunks (latency.prefill_chunk_work_ms).

This module is the fast model, a queueing approximation; tests/test_serving_oracle.py checks it against a
discrete-event simulation of that scheduler.

  * Decoding sequences N (Little's law): N = lambda (O - 1) T, with the mean iteration
    T = D(N) / (1 - rho_w) and rho_w = lambda E[W] the share of time prompt chunks take. Written in N,
    lambda(N) = N / ((O - 1) D(N) + N E[W]) is explicit, so N(lambda) is an interpolation.
  * Prefill queue: G/G/1 whose service is a prompt's work plus its share of the full iterations a
    backlog gets, S = W + n D(N) / C (C = budget - N prompt tokens per iteration). Utilization rho = lambda
    E[S]; the replica is stable while rho < 1 and N < max_running (the capacity). Wait (mean value): a prompt
    that fits the budget rides one iteration with those that arrived during the iteration before (`riders`),
    holding its share of that decode step, S_ride = W + D / riders (at light load the whole step); a backlog
    drains at the full budget, S. An arrival waits, with probability sigma, the rest of the prompt iteration
    in progress, then the backlog ahead at the full rate: mean sigma E[S_ride] / (1 - sigma_S) (ca^2 + cs^2) /
    (ca^2 + 1); sigma is GI/M/1's waiting probability for gamma inter-arrival times of CV ca (`arrival_cv`;
    rho under Poisson, larger for clumped arrivals); the wait is exponential given that it happens.
  * TTFT = own prefill iterations (ceil(n / C) D(N) + W) + either the wait or, for an arrival that does
    not wait, the rest of the decode-only iteration in progress, stretched by the prompts that arrive before
    its iteration starts and ride it (+ the engine's serving overhead).
  * ITL, per token and pooled over requests (as `vllm bench serve` reports it): a mixture of
    pure-decode iterations and iterations carrying prompt chunks (the prompts that arrived during the previous
    iteration, Poisson; the continuation chunks of prompts longer than C); the decode batch a token sees is 1
    + Poisson(N), which spreads D. Clumped arrivals (ca > 1): the window's P(no arrival) is the gamma renewal
    process's own, the windows that get arrivals get a geometric clump, and a two-state chain (prompt-carrying
    iterations are longer, so a clump's next arrival lands in the next one) scales the share of iterations
    that carry prompts.
  * E2E = TTFT + (O - 1) x mean iteration.
  * The roofline is a hard floor (planner.physics.roofline, issue 32): a short prompt's work W hides its
    compute under a pass's weight read, but prompts sharing a pass share that read, never their FLOPs. So
    every rate, iteration and service above is the larger of the engine's figure and the same figure with
    W and D replaced by their compute at peak (Wc, Dc): lambda(N) = N / max((O - 1) D + N E[W], (O - 1) Dc +
    N E[Wc]), T >= Dc / (1 - lambda E[Wc]), a pass of prompts lasts at least their compute.
A closed loop (a concurrency c) runs at the rate whose mean number in the system, lambda E[E2E], is c.
"""


from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from planner.core.deployment import Deployment
from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.physics.latency import decode_step, prefill_chunk_work_ms
from planner.physics.roofline import compute_floor_ms, prefill_compute_floor_ms, weights_read_ms
from planner.scenario.scenario import SchedulerSettings
from planner.serving.arrivals import waiting_probabilities, window_counts

LENGTH_GRID = 32  # equal-mass quantiles that stand for a length distribution
POPULATION_GRID = 160  # decoding-population points that tabulate the decode step


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
    # how the engine admits prompts behind running decodes (the closed-loop benchmark client follows it)
    scheduler: SchedulerSettings = SchedulerSettings()


@lru_cache(maxsize=256)
def _unit_quantiles(cv: float, n: int) -> tuple[float, ...]:
    """Equal-mass quantiles of a lognormal with mean 1 and coefficient of variation `cv`."""
    if cv <= 0:
        return (1.0,) * n
    sigma = math.sqrt(math.log1p(cv * cv))
    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    values = np.exp(sigma * np.array(z) - sigma * sigma / 2)
    return tuple(values / values.mean())  # the grid keeps the mean exactly


def geometric_grid(start: float, stop: float, num: int) -> np.ndarray:
    """np.geomspace(start, stop, num) for positive scalars and num >= 2: the same numbers, each computed as
    numpy computes it (log10 ends, linspace's steps, 10 ** each, ends restored), without its generality's
    cost (its grids are built thousands of times per sizing request)."""
    log_start, log_stop = np.log10(start), np.log10(stop)
    delta = log_stop - log_start
    step = delta / (num - 1)
    y = np.arange(num, dtype=float)
    if step == 0:  # linspace's way with a step that underflows
        y /= num - 1
        y *= delta
    else:
        y *= step
    y += log_start
    y[-1] = log_stop
    grid = np.power(10.0, y)
    grid[0], grid[-1] = start, stop
    return grid


def length_quantiles(mean: float, cv: float, n: int = LENGTH_GRID) -> np.ndarray:
    """Token lengths standing for a fixed (cv 0: one point) or lognormal length distribution, at least 1."""
    if cv <= 0:
        return np.array([max(round(mean), 1)], dtype=float)
    return np.maximum(np.round(mean * np.array(_unit_quantiles(float(cv), n))), 1.0)



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
    # the roofline's compute of each prompt on the grid and of the decode step at each N
    # (planner.physics.roofline): a pass carrying prompts lasts at least the sum over what it carries
    prefill_floor_ms: np.ndarray
    decode_floor_ms: np.ndarray
    # the weights a full pass (max_num_batched_tokens tokens) reads: every expert its tokens route to
    pass_read_ms: float

    # The model is immutable: the figures below are computed once per model (every load point asks for them).
    @functools.cached_property
    def decode_steps_per_request(self) -> float:
        return _length_mean(self.output_tokens - 1.0)

    @functools.cached_property
    def mean_prefill_work_ms(self) -> float:
        return _length_mean(self.prefill_work_ms)

    @functools.cached_property
    def mean_computed_tokens(self) -> float:
        return _length_mean(self.computed_tokens)

    @functools.cached_property
    def mean_prefill_floor_ms(self) -> float:
        return _length_mean(self.prefill_floor_ms)

    @functools.cached_property
    def floor_may_bind(self) -> bool:
        """Whether the roofline floor can exceed the engine's figures at some load: only where a prompt's
        work is below its compute (a short prompt, whose compute hides under a pass's weight read) or a decode
        step below its own; elsewhere every floored figure is the engine's, and load points skip the floor."""
        budget = self.workload.max_num_batched_tokens
        return bool((self.prefill_floor_ms > self.prefill_work_ms).any()
                    or (self.decode_floor_ms > self.decode_ms).any()
                    or self.mean_computed_tokens * self.pass_read_ms / budget > self.mean_prefill_work_ms)

    @functools.cached_property
    def capacity_at_max_running_per_ms(self) -> np.ndarray:
        """capacity_per_ms() at the workload's own cap on running sequences."""
        return self.capacity_per_ms()

    @functools.cached_property
    def _prefill_only_capacity_per_ms(self) -> np.float64:
        """No decode: the prefill queue alone saturates at 1 / its mean service."""
        budget = self.workload.max_num_batched_tokens
        service = self.mean_prefill_work_ms + np.mean(self.computed_tokens) * self.decode_ms[0] / budget
        # a full pass of prompts pays their compute and reads the weights its tokens touch, however little
        # each prompt adds to a pass alone
        return 1.0 / max(service, self.mean_prefill_floor_ms
                         + self.mean_computed_tokens * self.decode_floor_ms[0] / budget,
                         self.mean_computed_tokens * self.pass_read_ms / budget)

    @functools.cached_property
    def _utilization_limit_per_ms(self) -> float:
        """The rate where the prefill queue's utilization reaches 1 (inf where it never does)."""
        over = np.nonzero(self.utilization >= 1.0)[0]
        if not len(over):
            return math.inf
        i = over[0]
        if i == 0:
            return 0.0
        u0, u1 = self.utilization[i - 1], self.utilization[i]
        f = (1.0 - u0) / (u1 - u0) if np.isfinite(u1) else 0.0
        return float(self.rate_per_ms[i - 1] + f * (self.rate_per_ms[i] - self.rate_per_ms[i - 1]))

    def capacity_per_ms(self, max_running: float | np.ndarray | None = None) -> np.ndarray:
        """Saturation rate: where the prefill queue's utilization reaches 1 or N reaches max_running."""
        cap = np.asarray(self.workload.max_running if max_running is None else max_running, dtype=float)
        if self.decode_steps_per_request <= 0:  # no decode: the prefill queue alone
            return np.full_like(cap, self._prefill_only_capacity_per_ms)
        rho_limit = self._utilization_limit_per_ms
        slot_limit = np.interp(cap, self.population, self.rate_per_ms)
        return np.minimum(slot_limit, rho_limit)


PrefillWork = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (prompt tokens, cached tokens) -> work ms


def replica_model(d: Deployment, w: Workload, max_population: int | None = None,
                  prefill_work: PrefillWork | None = None) -> ReplicaModel:
    """Tabulate the step times once; `max_population` (default `w.max_running`) bounds the N grid.
    `prefill_work`: latency.prefill_chunk_work_ms(d, prompts, cached)'s figures, when the caller keeps them
    (planner.serving.layout_memo)."""
    prompts = length_quantiles(w.prompt_len, w.prompt_len_cv)
    outputs = length_quantiles(w.output_len, w.output_len_cv)
    computed = np.maximum(np.round(prompts * (1.0 - w.prefix_cache_hit)), 1.0)
    work = np.asarray(prefill_chunk_work_ms(d, prompts, prompts - computed) if prefill_work is None else
                      prefill_work(prompts, prompts - computed), dtype=float)
    top = max(float(max_population or w.max_running), 1.0)
    population = np.concatenate([[0.0], geometric_grid(1e-3, top, POPULATION_GRID - 1)])
    context = w.context if w.context is not None else w.prompt_len + w.output_len / 2
    step = decode_step(d, population, context)
    decode = np.asarray(step.total_ms, dtype=float)
    # The hard floor (planner.physics.roofline): a prompt's work is its pass's time beyond an empty pass,
    # which a short prompt's compute hides under the weight read; but prompts sharing a pass share that
    # read, not their FLOPs. So an iteration lasts at least the compute of all it carries: the decode
    # step's (Dc) and each prompt's (Wc), and each rate, share and service below is the larger of the
    # engine's figure and this floor's (the same bits where the engine's is larger).
    work_floor = prefill_compute_floor_ms(d, prompts, prompts - computed)
    decode_floor = np.broadcast_to(compute_floor_ms(d, step.work), population.shape)
    # and a full pass reads the weights its tokens touch (a cached prefix's prefill, subtracted from a
    # prompt's work, already read them: under MoE the empty pass reads no expert, the full one nearly all)
    pass_read = float(weights_read_ms(d, w.max_num_batched_tokens))
    steps = _length_mean(outputs - 1.0)
    mean_work, mean_floor = _length_mean(work), _length_mean(work_floor)
    mean_computed = _length_mean(computed)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (
            population / np.maximum(steps * decode + population * mean_work,
                                    steps * decode_floor + population * mean_floor)
            if steps > 0 else np.zeros_like(population)
        )
        chunk = w.max_num_batched_tokens - population
        service = np.maximum(np.maximum(mean_work + mean_computed * decode / chunk,
                                        mean_floor + mean_computed * decode_floor / chunk),
                             mean_computed * pass_read / chunk)
        util = np.where(chunk >= 1.0, rate * service, np.inf)
    model = ReplicaModel(w, prompts, computed, work, outputs, population, decode, rate, util, work_floor,
                         decode_floor, pass_read)
    # the means it keeps are the ones just computed (the same expressions): seeded, not recomputed
    model.__dict__.update(decode_steps_per_request=steps, mean_prefill_work_ms=mean_work,
                          mean_computed_tokens=mean_computed, mean_prefill_floor_ms=mean_floor)
    return model


def _length_mean(x: np.ndarray) -> float:
    """float(np.mean(x)) of a length grid; a fixed length's one point is its own mean (x / 1: the same
    bits), without the reduction's cost."""
    return float(x[0]) if np.shape(x) == (1,) else float(np.mean(x))


def mean_over_lengths(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """x.mean(axis=-1) over a length grid: a fixed length's one point is its own mean (a sum of one term
    divided by 1: the same bits), without the reduction's cost."""
    if np.shape(x)[-1] == 1:
        return x if keepdims else x[..., 0]
    return x.mean(axis=-1, keepdims=keepdims)


def variance_over_lengths(x: np.ndarray) -> np.ndarray:
    """x.var(axis=-1) over a length grid: of one point, (x - x)^2 (0, or NaN where x is not finite)."""
    if np.shape(x)[-1] == 1:
        spread = x[..., 0] - x[..., 0]
        return spread * spread
    return x.var(axis=-1)


def riders(rate_per_ms: np.ndarray, iteration_ms: np.ndarray, arrival_cv: float,
           elementwise: bool = False) -> np.ndarray:
    """Mean prompts in an iteration that carries prompts: those that arrived during the previous iteration,
    given at least one did (lambda T / P(N >= 1); Poisson: mu / (1 - e^-mu)). A prompt that fits the budget
    rides with them and pays its share of that iteration's decode step, not n / C of it: at light load each
    prompt holds a whole decode step. `elementwise`: as arrivals.window_counts'."""
    window = np.asarray(rate_per_ms * iteration_ms, dtype=float)
    some = 1.0 - window_counts(np.asarray(rate_per_ms, dtype=float), np.asarray(iteration_ms, dtype=float),
                               arrival_cv, 1, elementwise)[..., 0]
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


def _floored_iteration(m: ReplicaModel, lam: np.ndarray, dc: np.ndarray, iteration: np.ndarray,
                       share: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The roofline floor (replica_model) on the mean iteration: it lasts at least the compute of its decodes
    and of the prompts that ride it, Tc = Dc / (1 - lambda E[Wc]). Where that binds, every iteration is
    stretched to it (a token's decode step with it) and prompts hold the share lambda E[Wc] of the GPU's
    time. Returns the iteration, the prompts' share and the stretch (1 where the engine's figure holds)."""
    share_floor = lam * m.mean_prefill_floor_ms
    with np.errstate(divide="ignore", invalid="ignore"):
        iteration_floor = np.where(share_floor < 1.0, dc / (1.0 - share_floor), np.inf)
        floored = iteration_floor > iteration
        stretch = np.where(floored & np.isfinite(iteration_floor) & (iteration > 0),
                           iteration_floor / np.where(iteration > 0, iteration, 1.0), 1.0)
    if not floored.any():
        return iteration, share, stretch
    return np.where(floored, iteration_floor, iteration), np.where(floored, share_floor, share), stretch


def _floored_services(m: ReplicaModel, lam: np.ndarray, dc: np.ndarray, chunk: np.ndarray, held: np.ndarray,
                      full: np.ndarray, ride: np.ndarray, rho: np.ndarray, mean_s: np.ndarray):
    """The floor on a pass of prompts: each prompt's compute and its share of the decodes', and a full pass's
    share of its weight read. The services over lengths keep their shape, scaled where the pass's roofline is
    longer than the engine's figure."""
    full_floor = lam * np.maximum(
        mean_over_lengths(m.prefill_floor_ms + m.computed_tokens * (dc / chunk)[..., None]),
        m.mean_computed_tokens * m.pass_read_ms / chunk)
    ride_floor = mean_over_lengths(m.prefill_floor_ms + dc[..., None] * held)
    if not ((full_floor > rho).any() or (ride_floor > mean_s).any()):
        return full, ride, rho, mean_s
    with np.errstate(divide="ignore", invalid="ignore"):
        full_scale = np.where(full_floor > rho, full_floor / np.maximum(rho, 1e-300), 1.0)
        ride_scale = np.where(ride_floor > mean_s, ride_floor / np.maximum(mean_s, 1e-300), 1.0)
    return (full * full_scale[..., None], ride * ride_scale[..., None], np.maximum(rho, full_floor),
            np.maximum(mean_s, ride_floor))


def load_point(m: ReplicaModel, rate_per_ms, max_running=None, seen: float = 1.0,
               elementwise: bool = False, capacity_per_ms: np.ndarray | None = None) -> LoadPoint:
    """`seen`: an arrival in a closed loop of c clients finds the other c - 1 (the arrival theorem), so it
    sees (c - 1) / c of the mean decoding population and queue; an open loop's arrival sees all of it.
    `elementwise`: each rate of an array gets the figures it gets alone (clumped arrivals' series otherwise
    run until the whole array converges: arrivals.window_counts). `capacity_per_ms`:
    m.capacity_per_ms(max_running), when the caller has it."""
    lam = np.asarray(rate_per_ms, dtype=float)
    w = m.workload
    cap = (capacity_per_ms if capacity_per_ms is not None else m.capacity_per_ms(max_running)
           if max_running is not None else m.capacity_at_max_running_per_ms)
    n = np.interp(lam, m.rate_per_ms, m.population) if m.decode_steps_per_request > 0 else np.zeros_like(lam)
    d = np.interp(n, m.population, m.decode_ms)
    slope = np.interp(n + 1.0, m.population, m.decode_ms) - d
    spread = np.abs(slope) * np.sqrt(n)
    d_token = d + slope  # a token sees 1 + Poisson(N) sequences in its batch
    share = lam * m.mean_prefill_work_ms
    chunk = np.maximum(w.max_num_batched_tokens - n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        iteration = np.where(share < 1.0, d / (1.0 - share), np.inf)
    # the roofline floor, where it may bind (a short prompt's work below its compute)
    dc = np.interp(n, m.population, m.decode_floor_ms) if m.floor_may_bind else None
    if dc is not None:
        iteration, share, stretch = _floored_iteration(m, lam, dc, iteration, share)
        d_token, spread = d_token * stretch, spread * stretch
    # Prompts that fit the budget ride an iteration with the others that arrived during the one before;
    # each holds its share of that iteration's decode step (S_ride = W + D / riders; at light load the
    # whole step), while a backlog drains at the full budget (S_full = W + n D / C, which sets capacity).
    # Mean-value wait: an arrival waits the rest of the prompt iteration in progress (with probability
    # the time share of those, rho_ride = lambda E[S_ride]; residual E[S_ride] (1 + cs^2) / 2), then the
    # backlog ahead at the full rate: Wq = rho_ride R / (1 - rho_full). Clumped arrivals: both shares as
    # GI/M/1 waiting probabilities sigma (gamma arrivals; sigma = rho under Poisson), (ca^2 + cs^2) / 2
    # for (1 + cs^2) / 2 over (ca^2 + 1) / 2.
    together = riders(lam, iteration, w.arrival_cv, elementwise)
    full = m.prefill_work_ms + m.computed_tokens * (d / chunk)[..., None]
    held = np.maximum(m.computed_tokens / chunk[..., None], 1.0 / together[..., None])
    ride = m.prefill_work_ms + d[..., None] * held
    rho = lam * mean_over_lengths(full)
    mean_s = mean_over_lengths(ride)
    if dc is not None:
        full, ride, rho, mean_s = _floored_services(m, lam, dc, chunk, held, full, ride, rho, mean_s)
    cs2 = variance_over_lengths(ride) / np.maximum(mean_s, 1e-12) ** 2
    # at capacity itself is not below it: a rate given as the capacity may come back a rounding under it
    stable = (lam < cap * (1.0 - 1e-9)) & (rho < 1.0) & (share < 1.0)
    ca2 = w.arrival_cv ** 2
    sigma, sigma_full = waiting_probabilities(np.minimum(lam * mean_s, 1.0), np.minimum(rho, 1.0),
                                              w.arrival_cv)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1.0, sigma / (1.0 - sigma_full) * (ca2 + cs2) / (ca2 + 1.0) * mean_s, np.inf)
    return LoadPoint(lam, n, d_token, spread, iteration, chunk, rho, share, wait, stable, seen, sigma)
