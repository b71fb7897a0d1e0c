#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scale-out, the model: how many nodes serve N agents at a p99 latency, from what one call
costs on a machine (campaign/scale/measure.mjs), checked first against that machine's own
latencies at the loads it held (docs/scale-out.md).

    campaign/scale/model.py measured.json [--seed N] > tables.md

A node is a discrete-event simulation of `pybox mcp --listen` on c cores: each call of a
kind k spends a CPU demand D_k (the CPU its server thread and its box used, measured with
one client) shared among the calls in progress (processor sharing, at most one core per
call: a call is one Python process and one server thread), and a delay d_k that uses no
CPU (the latency with one client less D_k, at least 0: waits on the kernel and the
filesystem, the HTTP exchange). Calls beyond a node's memory (its RAM over the box's
memory limit) wait for one to end. Other work on a shared machine (measured from
/proc/stat while each phase ran) takes the cores it used away.

The check: the machine's own closed loops (C clients, each sending its next call when its
last one answered) simulated with what other work used meanwhile, and the clients' own
CPU per call added (they ran on the same machine), against the measured mean, p50, p99
and calls per second. The answer: for nodes of 2, 16 and 64 cores, the
most calls per second (Poisson arrivals of the measured mix) that keep a p99 target, then
nodes for N agents that each call at a given rate. Pure standard library; the same seed
gives the same tables.
"""
import argparse
import heapq
import json
import math
import random
import sys


def kinds_of(m):
    """(name, share, cpu_ms, delay_ms) of each kind, from the one-client measurements. The
    one call had the cores the others' work left (at most one), and its delay is its
    latency less its CPU at that rate."""
    cores = m["machine"]["cpus"]
    out = []
    for name, k in m["kinds"].items():
        cpu = k["cpu_ms_per_call"]
        share = min(1.0, max(0.25, cores - k.get("others_cores", 0.0)))
        delay = max(0.0, k["latency_ms"]["mean"] - cpu / share)
        out.append((name, k["share"], cpu, delay))
    return out


def simulate(kinds, cores, *, clients=None, rate=None, calls=20000, extra_cpu=0.0, max_conc=None, seed=1):
    """Latencies (ms) of `calls` calls on a node of `cores` cores, and the time it took:
    a closed loop of `clients` with no think time, or Poisson arrivals at `rate` calls per
    second. extra_cpu: CPU (ms) added to each call (the clients' own, when they share
    the node). max_conc: calls in progress at most (memory); the rest wait in order.
    others: cores other work keeps busy on the node, competing for it as that many more
    running threads (the scheduler's fair share).

    Processor sharing with a cap of one core per call, kept in virtual time: v grows at
    the rate each call in its CPU phase gets (min(1, cores/n)); a call entering its CPU
    phase at v with demand D leaves when v reaches v + D."""
    rnd = random.Random(seed)
    shares = [k[1] for k in kinds]
    now = 0.0
    v = 0.0
    cpu = []  # heap of (v at which it leaves, job)
    events = []  # heap of (time, seq, what, job): a delay's end, an arrival
    seq = 0
    waiting = []
    in_progress = 0
    start = {}
    kind = {}
    done = []
    next_job = 0

    def push(t, what, job):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, what, job))

    def arrive():
        nonlocal next_job, in_progress
        job = next_job
        next_job += 1
        kind[job] = rnd.choices(kinds, weights=shares)[0]
        start[job] = now
        if max_conc is not None and in_progress >= max_conc:
            waiting.append(job)
        else:
            in_progress += 1
            push(now + kind[job][3], "cpu", job)

    if clients is not None:
        for _ in range(clients):
            arrive()
    else:
        push(rnd.expovariate(rate / 1000.0), "arrive", None)

    while len(done) < calls:
        r = min(1.0, cores / len(cpu)) if cpu else 0.0
        t_cpu = now + (cpu[0][0] - v) / r if cpu else math.inf
        t_ev = events[0][0] if events else math.inf
        if t_cpu <= t_ev:
            v = cpu[0][0]
            now = t_cpu
            _, job = heapq.heappop(cpu)
            in_progress -= 1
            done.append(now - start.pop(job))
            kind.pop(job)
            if waiting:
                w = waiting.pop(0)
                in_progress += 1
                push(now + kind[w][3], "cpu", w)
            if clients is not None:
                arrive()
            continue
        t, _, what, job = heapq.heappop(events)
        v += (t - now) * r
        now = t
        if what == "cpu":
            heapq.heappush(cpu, (v + kind[job][2] + extra_cpu, job))
        else:
            arrive()
            push(now + rnd.expovariate(rate / 1000.0), "arrive", None)
    return done, now


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))]


def summary(lat, span_ms):
    return {
        "mean": sum(lat) / len(lat),
        "p50": pct(lat, 0.5),
        "p99": pct(lat, 0.99),
        "calls_per_s": len(lat) / (span_ms / 1000.0),
    }


UTILIZATION_MAX = 0.9  # a node is planned to use at most this share of its CPU


def capacity(kinds, cores, p99_ms, max_conc, seed):
    """The most calls per second (Poisson) a node takes with p99 <= p99_ms, and at most
    UTILIZATION_MAX of its CPU (near saturation a queue settles too slowly for any
    simulated minute to show its p99, and no operator plans a node there)."""
    mean_cpu = sum(k[1] * k[2] for k in kinds) / sum(k[1] for k in kinds)
    hi = cores * 1000.0 / mean_cpu  # the CPU's own bound: past it the queue only grows
    lo = 0.0
    for _ in range(16):
        mid = (lo + hi) / 2
        # long enough at any rate for the queue to settle: a minute of arrivals at least
        n = max(20000, int(mid * 60))
        lat, _ = simulate(kinds, cores, rate=mid, calls=n, max_conc=max_conc, seed=seed)
        if pct(lat[n // 10:], 0.99) <= p99_ms:
            lo = mid
        else:
            hi = mid
    return min(lo, UTILIZATION_MAX * cores * 1000.0 / mean_cpu)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("measured")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--agent-interval-s", type=float, default=20.0,
                    help="an agent's calls come this far apart on average (its model's turn)")
    a = ap.parse_args()
    with open(a.measured) as f:
        m = json.load(f)
    kinds = kinds_of(m)
    cores = m["machine"]["cpus"]
    w = sys.stdout.write
    w("### The inputs: one call of each kind, one client, on this machine\n\n")
    w(f"{cores} cores, {m['machine']['memory_mib']} MiB, backend {m['machine']['backend']}, "
      f"{m['calls_per_client']} calls of each kind.\n\n")
    w("| kind | share | CPU per call (ms) | delay without CPU (ms) | latency mean / p99 (ms) | box peak memory (MiB) |\n")
    w("|---|---|---|---|---|---|\n")
    for name, share, cpu, delay in kinds:
        k = m["kinds"][name]
        w(f"| {name} | {share:.0%} | {cpu:.1f} | {delay:.1f} | {k['latency_ms']['mean']:.1f} / "
          f"{k['latency_ms']['p99']:.1f} | {k['memory_peak_mib_max']:.1f} |\n")
    mean_cpu = sum(k[1] * k[2] for k in kinds)
    w(f"\nThe mix: {mean_cpu:.1f} ms of CPU per call on average.\n\n")

    base = m["loads"][0]["cpu_ms_per_call"]
    w("### The check: this machine's closed loops, measured and simulated\n\n")
    w("Each row twice: the model with each kind's CPU as measured alone, then (\"at load\") with it scaled "
      "by the mix's CPU per call measured at that load over one client's (it grows with concurrency).\n\n")
    w("| clients | model | calls/s measured / model | mean (ms) measured / model | p50 | p99 | others' cores | CPU per call at load |\n")
    w("|---|---|---|---|---|---|---|---|\n")
    errors = []
    for load, scaled in [(x, sc) for x in m["loads"] for sc in (False, True)]:
        c = load["clients"]
        others = load.get("others_cores", 0.0)
        growth = load["cpu_ms_per_call"] / base if scaled else 1.0
        ks = [(n, sh, cpu * growth, d) for n, sh, cpu, d in kinds]
        # the cores the others' work left (what it used meanwhile, from /proc/stat)
        lat, span = simulate(ks, max(0.25, cores - others), clients=c, calls=4000,
                             extra_cpu=load.get("client_cpu_ms_per_call", 0.0), seed=a.seed)
        s = summary(lat[200:], span * (len(lat) - 200) / len(lat))
        meas = load["latency_ms"]
        err = {k: (s[k] - meas[k]) / meas[k] for k in ("mean", "p50", "p99")}
        err["calls_per_s"] = (s["calls_per_s"] - load["calls_per_s"]) / load["calls_per_s"]
        errors.append((c, scaled, err))

        def pair(x, y, e):
            return f"{x:.1f} / {y:.1f} ({e:+.0%})"
        w(f"| {c} | {'at load' if scaled else 'alone'} | {pair(load['calls_per_s'], s['calls_per_s'], err['calls_per_s'])} | "
          f"{pair(meas['mean'], s['mean'], err['mean'])} | {pair(meas['p50'], s['p50'], err['p50'])} | "
          f"{pair(meas['p99'], s['p99'], err['p99'])} | {others:.2f} | {growth:.2f}x |\n")
    for scaled in (False, True):
        worst = max(abs(e[k]) for _, sc, e in errors if sc == scaled for k in e)
        thr = max(abs(e["calls_per_s"]) for _, sc, e in errors if sc == scaled)
        w(f"\n{'At load' if scaled else 'Alone'}: the largest difference between model and measurement is {worst:.0%} "
          f"(calls per second: {thr:.0%}).")
    w("\n\n")
    growth = max(x["cpu_ms_per_call"] for x in m["loads"]) / base
    kinds = [(n, sh, cpu * growth, d) for n, sh, cpu, d in kinds]
    w(f"The answer below takes each call's CPU at its highest measured growth, {growth:.2f}x (the mix: "
      f"{mean_cpu * growth:.1f} ms of CPU per call).\n\n")

    w("### Nodes for N agents\n\n")
    box_mib = 128
    w(f"Calls of the mix arriving at random (Poisson); each node's calls in progress at most "
      f"its RAM (4 GiB per core) at 80% over the default box memory ({box_mib} MiB); a node "
      f"planned at {UTILIZATION_MAX:.0%} of its CPU at most. An agent calls once every "
      f"{a.agent_interval_s:g} s on average.\n\n")
    targets = [500.0, 1000.0, 2000.0]
    sizes = [2, 16, 64]
    cap = {}
    for cores_n in sizes:
        mem_mib = cores_n * 4096
        max_conc = int(mem_mib * 0.8 // box_mib)
        for t in targets:
            cap[(cores_n, t)] = capacity(kinds, cores_n, t, max_conc, a.seed)
    w("| node | " + " | ".join(f"calls/s at p99 {t / 1000:g} s" for t in targets) + " |\n")
    w("|---|" + "---|" * len(targets) + "\n")
    for cores_n in sizes:
        w(f"| {cores_n} cores | " + " | ".join(f"{cap[(cores_n, t)]:.1f}" for t in targets) + " |\n")
    w("\n| agents | calls/s | " + " | ".join(f"{c}-core nodes (p99 1 s)" for c in sizes) + " |\n")
    w("|---|---|" + "---|" * len(sizes) + "\n")
    for n in [10, 100, 1000, 10000, 100000]:
        lam = n / a.agent_interval_s
        w(f"| {n} | {lam:.1f} | " + " | ".join(str(max(1, math.ceil(lam / cap[(c, 1000.0)]))) for c in sizes) + " |\n")
    json.dump({"errors": {f"{c}{' at load' if sc else ''}": e for c, sc, e in errors}, "capacity": {f"{c}@{t}": v for (c, t), v in cap.items()}},
              sys.stderr)
    sys.stderr.write("\n")


if __name__ == "__main__":
    main()
