#!/usr/bin/env python3
"""How good is the step log's ETA? Reads the log of a finished `orbis run` and compares, at
every step line, the ETA with the time that really remained: to the run's end (its
"finished:" or "stopped:" line; the last step line where the log has neither), or with
--to=steps to the last step line (what this script measured before the ETA counted the
energy check at the end and the wait for the last output). Prints the error at 10, 25, 50
and 75% of the run and the worst one from a given fraction on (default 10%, the issue's bar:
within 25%), skipping the lines with less than --min-left seconds left (default 30: there the
ETA's 1 s resolution dominates).

    eta_accuracy.py RUN.log [--from=0.1] [--min-left=30] [--to=steps] [--replay [--output-estimate=SECONDS]]

--replay recomputes the ETA from the log's own lines with the model of
src/integrate/cost_model.cpp and the inputs simulation.cpp gives it (a replica: keep the two
in step), so that a log written by an older orbis tells how the current model would have done
on the same run. With hierarchical steps the model's linear-power inputs come from the log's
"ETA forecast:" line; a log without one gets them from the Eisenstein & Hu no-wiggle P(k) of
its [cosmology] (cosmology.omega_m etc.; for the replay only: the runs use their own P(k)).
The work of an active particle is the forecast line's; a log without it takes a leaf of the
ORB tree (N / ranks particles, gravity.max_leaf) where the log says "step engine: cuda", else
one particle. Before the first output the output cost is the run's estimate (simulation.cpp:
on one rank the background writer's copy, the snapshot's particle bytes at 2 GB/s; on
several, outputs.cpp's output_file_bytes at 1 GB/s plus 0.015 us per particle; the ranks
from the log's first line), or --output-estimate=SECONDS; from then on the mean io seconds of
the outputs written, as in the run. The energy check's W: the mean of the "energy check at"
lines' seconds so far; the background writer's seconds (the last output's wait): the mean of
the "output NNN written in" lines so far, before any the files' estimate.
"""
import math
import re
import sys

MAX_COST_GROWTH = 0.5   # cost_model.hpp: kMaxCostGrowth

STEP = re.compile(r"^\[\s*([0-9.]+)s\] step\s+(\d+) a ([0-9.]+) .*?\| active (\d+) bins (\S+) \| ([0-9.]+) s:(.*?) io "
                  r"([0-9.]+) .*\| ETA (\S+)")


def seconds(text):
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not m or text in ("", "?"):
        return None
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return 3600 * h + 60 * mi + s


def read_log(path):
    """The step lines, and where the other lines the replay reads fell among them (the number of
    step lines before each): the energy checks' W seconds, the background writer's seconds."""
    rows, a_begin, z_out, z_final, params, forecast = [], None, [], 0.0, {}, None
    params["checks"], params["writer"], params["finish"] = [], [], None
    with open(path) as f:
        for line in f:
            line = line.replace("\x1b[K", "")
            m = STEP.match(line)
            if m:
                phases = {k: float(v) for k, v in zip(*[iter(m.group(7).split())] * 2)}
                rows.append(dict(t=float(m.group(1)), step=int(m.group(2)), a=float(m.group(3)),
                                 active=int(m.group(4)), deepest=int(m.group(5).split("-")[-1]),
                                 seconds=float(m.group(6)), io=float(m.group(8)), eta=seconds(m.group(9)),
                                 phases=phases, pm_end="|sum p|" in line))
                continue
            m = re.search(r"^\[\s*[0-9.]+s\] energy check at a = .*\(([0-9.]+) s\)$", line.rstrip())
            if m:
                params["checks"].append((len(rows), float(m.group(1))))
            m = re.search(r"^\[\s*[0-9.]+s\] output \d+ written in ([0-9.]+) s", line)
            if m:
                params["writer"].append((len(rows), float(m.group(1))))
            m = re.search(r"^\[\s*([0-9.]+)s\] (?:finished|stopped)", line)
            if m:
                params["finish"] = float(m.group(1))
            if "step engine: cuda" in line:
                params["cuda"] = True
            m = re.search(r"\| (\d+) ranks? x \d+ threads?$", line.rstrip())
            if m:
                params["ranks"] = m.group(1)
            m = re.search(r"run from a = ([0-9.e+-]+)", line)
            if m:
                a_begin = float(m.group(1))
            m = re.search(r"\]   ([a-z_0-9]+\.[a-z_0-9]+) = (.*)$", line.rstrip())
            if m:
                params[m.group(1)] = m.group(2)
            m = re.search(r"ETA forecast: sigma_psi = (\S+) Mpc/h; sigma\(M\) at 10\^\(j/4\) particles = ([^;]*)"
                          r"(?:; an active particle's short-range work: (\S+) particles)?$", line.rstrip())
            if m:
                forecast = (float(m.group(1)), [float(x) for x in m.group(2).split()])
                if m.group(3):
                    params["work_particles"] = float(m.group(3))
    z_out = [float(z) for z in params.get("time.output_redshifts", "[]").strip("[]").split(",") if z.strip()]
    z_final = float(params.get("time.z_final", 0.0))
    return rows, a_begin, sorted(1 / (1 + z) for z in z_out), 1 / (1 + z_final), params, forecast


# ---- The replica of cost_model.cpp (hierarchical steps) ----
G, H0 = 43.0071, 100.0                   # core/units.hpp
RHO_CRIT0 = 3 * H0 * H0 / (8 * math.pi * G)
DELTA_C, HALO_DENSITY, GRID_STEP = 1.686, 200.0, 0.01
SOFTENED_PEAK = 2 / (3 * math.sqrt(3))
DEEPEST_BIN = 30                         # time_bins.hpp: kDeepestBin
WINDOW_TIE = 1e-4                        # cost_model.cpp: kWindowTie


class Background:
    """E(a), D(a) (D(1) = 1) of a Lambda-CDM background, w0 = -1."""
    def __init__(self, omega_m, omega_lambda):
        self.om, self.ol = omega_m, omega_lambda
        self.norm = self._d(1.0)

    def hubble(self, a):
        return H0 * math.sqrt(self.om / a**3 + self.ol + (1 - self.om - self.ol) / a**2)

    def _d(self, a, n=400):
        # D ~ 5/2 Omega_m E(a) int_0^a da' / (a' E(a'))^3: Simpson's rule in u = a'^(1/2) (the integrand ~ u^2 near 0)
        f = lambda u: 2 * u / (u * u * self.hubble(u * u) / H0) ** 3 if u > 0 else 0.0
        h = math.sqrt(a) / n
        total = sum((1 if i in (0, n) else 4 if i % 2 else 2) * f(i * h) for i in range(n + 1)) * h / 3
        return 2.5 * self.om * self.hubble(a) / H0 * total

    def growth(self, a):
        return self._d(a) / self.norm


def eh_nowiggle_inputs(params, n_side, box):
    """sigma_psi and sigma(M_j) from the EH98 no-wiggle P(k) (cost_model.cpp takes the run's own P(k))."""
    om, ob, h = (float(params[k]) for k in ("cosmology.omega_m", "cosmology.omega_b", "cosmology.h"))
    ns, s8 = float(params["cosmology.n_s"]), float(params["cosmology.sigma8"])
    theta, omh2 = 2.7255 / 2.7, om * h * h
    s_fit = 44.5 * math.log(9.83 / omh2) / math.sqrt(1 + 10 * (ob * h * h) ** 0.75)
    a_g = 1 - 0.328 * math.log(431 * omh2) * ob / om + 0.38 * math.log(22.3 * omh2) * (ob / om) ** 2

    def shape(k):
        gamma = om * h * (a_g + (1 - a_g) / (1 + (0.43 * k * h * s_fit) ** 4))
        q = k * theta * theta / gamma
        l0 = math.log(2 * math.e + 1.8 * q)
        t = l0 / (l0 + (14.2 + 731 / (1 + 62.5 * q)) * q * q)
        return k ** ns * t * t

    def simpson(f, lo, hi, n):
        return sum((1 if i in (0, n) else 4 if i % 2 else 2) * f(lo + (hi - lo) * i / n) for i in range(n + 1)) * (hi - lo) / (3 * n)

    def sigma2(r):
        def f(lk):
            k = math.exp(lk)
            x = k * r
            w = 3 * (math.sin(x) - x * math.cos(x)) / x**3 if x > 1e-3 else 1 - x * x / 10
            return k**3 * shape(k) * w * w / (2 * math.pi**2)
        return simpson(f, math.log(1e-5), math.log(1e3 / r), 1200)

    amp = s8 * s8 / sigma2(8.0)
    lo, hi = math.log(2 * math.pi / box), math.log(math.pi * n_side / box)
    sigma_psi = math.sqrt(amp * simpson(lambda lk: math.exp(lk) * shape(math.exp(lk)), lo, hi, 512) / (2 * math.pi**2))
    rho, n = om * RHO_CRIT0, n_side**3
    mass = om * RHO_CRIT0 * box**3 / n
    sig = [math.sqrt(amp * sigma2((3 * mass * 10 ** (j / 4) / (4 * math.pi * rho)) ** (1 / 3)))
           for j in range(int(math.floor(4 * math.log10(n))) + 1)]
    return sigma_psi, sig


def softened_sphere_shell(x, e):
    """cost_model.cpp's softened_sphere_shell: the mass fraction of the shell with |g| > x g_vir and the sum of
    (r / r_vir)^(2/3) over its bounding spheres."""
    if not (e > 0 and x > 0):
        return (1 / x, 1.0 / x ** (2 / 3)) if x > 1 else (1.0, 1.0)
    t = x * e
    if not t < SOFTENED_PEAK:
        return 0.0, 0.0
    f = lambda y: y * y / (1 + y * y) ** 1.5

    def root(lo, hi, rising):
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if (f(mid) < t) == rising:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)
    y1, y2 = root(0.0, math.sqrt(2), True), root(math.sqrt(2), max(math.sqrt(2), 1 / t), False)
    inner, outer = min(1.0, e * y1), min(1.0, e * y2)
    if not outer > inner:
        return 0.0, 0.0
    return outer - inner, inner ** (2 / 3) + outer ** (2 / 3)


CUT_LEAVES = 0.75 * (4 * math.pi) ** (1 / 3)


def halo_leaf_share(share, surfaces, n_h, leaf):
    """cost_model.cpp's halo_leaf_share."""
    if not share > 0:
        return 0.0
    return min(leaf * share, share + CUT_LEAVES * (leaf / n_h) ** (1 / 3) * surfaces)


class Forecast:
    """cost_model.cpp's ClusteringInputs, forecast_bins and ClusteringForecast."""
    def __init__(self, params, forecast_line, ln_a_begin, ln_a_end):
        self.om = float(params["cosmology.omega_m"])
        n_side, box = int(params["box.particles_per_side"]), float(params["box.size_mpc_h"])
        self.n = float(n_side) ** 3
        self.eps = float(params["gravity.softening_over_spacing"]) * box / n_side
        self.eta, self.max_dln = float(params["time.eta"]), float(params["time.max_dln_a"])
        self.mass = self.om * RHO_CRIT0 * box**3 / self.n
        self.sigma_psi, self.sigma_m = forecast_line or eh_nowiggle_inputs(params, n_side, box)
        ranks = int(params.get("ranks", 1))
        self.work = max(1.0, params["work_particles"] if "work_particles" in params else
                        leaf_particles(self.n / ranks, int(params.get("gravity.max_leaf", 1))) if params.get("cuda") else 1.0)
        bg = Background(self.om, float(params.get("cosmology.omega_lambda", 1 - self.om)))
        n = max(2, int(math.ceil((ln_a_end - ln_a_begin) / GRID_STEP)) + 1)
        self.begin, self.step = ln_a_begin, max(ln_a_end - ln_a_begin, 1e-9) / (n - 1)
        self.table = []
        for i in range(n):
            a = math.exp(self.begin + self.step * i)
            self.table.append(self.bins(bg.growth(a), bg.hubble(a), a, self.max_dln))

    def active_above(self, growth, g):
        """cost_model.cpp's active_above: (f, A) the fraction of particles with |g| > g, and the prior share of
        the short-range work that a sync point with those active does."""
        s = 1.5 * self.om * H0 * H0 * growth * self.sigma_psi
        x = g * math.sqrt(3) / s
        field = math.erfc(x / math.sqrt(2)) + math.sqrt(2 / math.pi) * x * math.exp(-0.5 * x * x)
        rho, halo, touched = self.om * RHO_CRIT0, 0.0, 0.0
        for j in range(len(self.sigma_m) - 1):
            f = (math.erfc(DELTA_C / (self.sigma_m[j] * growth * math.sqrt(2)))
                 - math.erfc(DELTA_C / (self.sigma_m[j + 1] * growth * math.sqrt(2))))
            if not f > 1e-12:
                continue
            m = self.mass * 10 ** ((j + 0.5) / 4)
            r_vir = (3 * m / (4 * math.pi * HALO_DENSITY * rho)) ** (1 / 3)
            share, surfaces = softened_sphere_shell(g / (G * m / (r_vir * r_vir)), self.eps / r_vir)
            halo += f * share
            touched += f * halo_leaf_share(share, surfaces, m / self.mass, self.work)
        p = 1 - (1 - field) * (1 - halo)
        if not p < 1:
            return p, 1.0
        a = -math.expm1(self.work * math.log1p(-field) + math.log1p(-touched)) if field < 1 and touched < 1 else 1.0
        return p, min(max(a, p), -math.expm1(self.work * math.log1p(-p)))

    def bins(self, growth, hubble, a, dln):
        """Kicks per particle, the deepest bin, above[k] the fraction in bins >= k and work[k] its prior A."""
        kicks, deepest, above, work = 1.0, 0, [0.0] * (DEEPEST_BIN + 1), [0.0] * (DEEPEST_BIN + 1)
        if not (self.eta > 0 and self.eps > 0 and dln > 0):   # every particle in bin 0 (timestep.cpp)
            return kicks, deepest, above, work
        acc0 = self.eps * a**3 * (self.eta * hubble / dln) ** 2
        for k in range(1, DEEPEST_BIN + 1):
            p, w = self.active_above(growth, acc0 * 4 ** (k - 1))
            if p * self.n < 1:
                break
            kicks += p * 2 ** (k - 1)
            deepest = k
            above[k], work[k] = p, w
        return kicks, deepest, above, work

    def at(self, ln_a):
        u = min(max((ln_a - self.begin) / self.step, 0.0), len(self.table) - 1.0)
        i = min(int(u), len(self.table) - 2)
        t = u - i
        lo, hi = self.table[i], self.table[i + 1]
        return ((1 - t) * lo[0] + t * hi[0], lo[1] if t < 1 else hi[1],
                [(1 - t) * p + t * q for p, q in zip(lo[2], hi[2])], [(1 - t) * p + t * q for p, q in zip(lo[3], hi[3])])


def recent_window(history, ln_a):
    cut = ln_a - 0.5 * (ln_a - history[0]["x"]) - WINDOW_TIE
    begin = len(history)
    while begin > 0 and history[begin - 1]["x"] >= cut:
        begin -= 1
    return history[min(begin, max(0, len(history) - 3)):]


def leaf_particles(n, max_leaf):
    """cost_model.cpp's leaf_particles: n / the leaves of OrbTree::shape(n, max_leaf)."""
    def pair(m):
        if m + 1 <= max_leaf:
            return 1, 1
        if m <= max_leaf:
            return 1, 2
        a, b = pair(m // 2)
        return (2 * a, a + b) if m % 2 == 0 else (a + b, 2 * b)
    return n / pair(int(n))[0] if n >= 1 and max_leaf >= 1 else 1.0


SUB_BUCKETS = 48                         # run_state.hpp: kSubStepBuckets


def sub_bucket(active, n):
    f = active / max(1.0, n)
    return min(max(int(math.floor(-math.log2(f))), 0), SUB_BUCKETS - 1) if f > 0 else SUB_BUCKETS - 1


def other_seconds(o, pm_steps):
    """cost_model.cpp's other_seconds: outputs, the energy check's W, the last output's wait."""
    checks = max(0, o["checks"]) + (math.floor(pm_steps / o["every"]) if o["every"] > 0 else 0)
    return max(0, o["remaining"]) * max(0.0, o["each"]) + checks * max(0.0, o["w"]) + max(0.0, o["wait"])


def sync_point_price(window, n):
    """cost_model.cpp's sync_point_price: (E, s0, e, weight, alpha) or None."""
    fulls = [h for h in window if h["end_seconds"] > 0]
    if not fulls or n <= 0:
        return None
    full = sum(h["end_seconds"] for h in fulls) / len(fulls)
    pm = sum(h["end_pm"] for h in fulls) / len(fulls)
    mins = [h["sub_min"] for h in window if h["sub_min"] > 0]
    fixed = min(mins) if mins else max(0.0, min(h["end_other"] for h in fulls))
    work = max(0.0, full - fixed - pm)
    sub = {}
    for h in window:
        for b, c in h["sub"].items():
            o = sub.setdefault(b, [0, 0.0, 0.0])
            o[0] += c[0]
            o[1] += c[1]
            o[2] += c[2]
    measured = sum(c[1] - c[0] * fixed for c in sub.values())
    price = dict(full=full, fixed=fixed, work=work, weight=0.0, alpha=1.0)
    if not (measured > 0 and work > 0):
        return price

    def priced(alpha):
        return sum(c[0] * work * min(1.0, c[2] / (c[0] * n)) ** alpha for c in sub.values() if c[0] > 0)
    lo, hi = 0.0, 1.0
    if priced(hi) >= measured:
        lo = hi
    elif priced(lo) <= measured:
        hi = lo
    else:
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if priced(mid) > measured:
                lo = mid
            else:
                hi = mid
    price["alpha"] = 0.5 * (lo + hi)
    price["weight"] = measured / (measured + work)
    return price


def price_at(p, f, prior):
    if not f > 0:
        return 0.0
    return p["work"] * (p["weight"] * min(f, 1.0) ** p["alpha"] + (1 - p["weight"]) * min(prior, 1.0))


def forecast_seconds(history, forecast, ln_a, ln_a_end, other):
    """forecast_remaining_seconds."""
    window = recent_window(history, ln_a)
    dln = max(h["d"] for h in window)   # the longest recent PM step
    price = sync_point_price(window, forecast.n)
    total, pm_steps, x = 0.0, 0.0, ln_a
    if price is None:
        spent, kicks = sum(h["s"] for h in window), sum(h["kicks"] / forecast.n for h in window)
        if not (spent > 0 and kicks > 0 and dln > 0):
            return None
        while x < ln_a_end - 1e-9:
            d = min(dln, ln_a_end - x)
            total += spent / kicks * forecast.at(x + 0.5 * d)[0] * d / dln
            pm_steps += d / dln
            x += dln
        return total + other_seconds(other, pm_steps)
    last = history[-1]
    lower = min(0, last["deepest"] - forecast.at(last["x"] + 0.5 * last["d"])[1]) if last["deepest"] > 0 else 0
    while dln > 0 and x < ln_a_end - 1e-9:
        d = min(dln, ln_a_end - x)
        _, deepest, above, work = forecast.at(x + 0.5 * d)
        step = price["full"]
        for k in range(1, max(0, deepest + lower) + 1):
            step += (price["fixed"] + price_at(price, above[k], work[k])) * 2.0 ** (k - 1)
        total += step * d / dln
        pm_steps += d / dln
        x += dln
    return total + other_seconds(other, pm_steps)


def trend_seconds(history, ln_a, ln_a_end, other):
    """predicted_remaining_seconds (global steps)."""
    # Only the steps with both a length and seconds (a log's 3 decimals can leave seconds - io at 0).
    window = [h for h in recent_window(history, ln_a) if h["d"] > 0 and h["s"] > 0]
    if not window:
        return None
    xs = [h["x"] + 0.5 * h["d"] for h in window]
    ys = [math.log(h["s"] / h["d"]) for h in window]
    n = len(window)
    sx, sy = sum(xs), sum(ys)
    den = n * sum(x * x for x in xs) - sx * sx
    beta = min(max((n * sum(x * y for x, y in zip(xs, ys)) - sx * sy) / den, 0.0), MAX_COST_GROWTH) if den > 0 else 0
    rate = sum(h["s"] for h in window) / sum(h["d"] for h in window) * math.exp(beta * (ln_a - sx / n))
    left = max(0.0, ln_a_end - ln_a)
    steps = rate * (math.expm1(beta * left) / beta if beta * left > 1e-9 else left)
    return steps + other_seconds(other, left * n / sum(h["d"] for h in window))


def output_estimate_seconds(params, ranks):
    """simulation.cpp's cost of one output before the first: on one rank the background writer's copy (the
    snapshot's particle bytes at 2 GB/s), on several output_file_bytes at 1 GB/s + 0.015 us per particle."""
    n = float(params["box.particles_per_side"]) ** 3
    on = lambda key: params.get(key, "false") == "true"
    if ranks == 1:
        return n * (48 + 8 + (24 if on("output.accelerations") else 0)) / 2e9
    size = 1 << 20
    if on("output.snapshots"):
        size += n * (48 + 8 + (24 if on("output.accelerations") else 0))
    if on("analysis.fof"):
        size += 8 * n
    return size / 1e9 + 1.5e-8 * n


def replay(rows, a_begin, a_outputs, a_end, output_estimate, params, forecast_line):
    """cost_model.cpp's prediction at every step line, with simulation.cpp's inputs."""
    hierarchical = params.get("time.stepping", "'hierarchical'").strip("'") == "hierarchical"
    ranks = int(params.get("ranks", 1))
    if output_estimate is None:
        output_estimate = output_estimate_seconds(params, ranks)
    n = float(params["box.particles_per_side"]) ** 3
    files_estimate = output_estimate_seconds(params, 2)   # the writer's, before any is measured
    forecast = Forecast(params, forecast_line, math.log(a_begin), math.log(a_end)) if hierarchical else None
    energy = params.get("analysis.energy_check", "false") == "true"
    every = int(params.get("analysis.energy_check_every", 0))
    end_output = any(abs(a - a_end) <= 1e-9 * a_end for a in a_outputs)
    history, start, outputs = [], math.log(a_begin), []

    def fresh():
        return dict(s=0.0, kicks=0, syncs=0, deepest=0, sub_min=0.0, sub={})
    step = fresh()
    for i, r in enumerate(rows):
        seconds = r["seconds"] - r["io"]
        step["s"] += seconds
        step["kicks"] += r["active"]
        step["syncs"] += 1
        step["deepest"] = max(step["deepest"], r["deepest"])
        if not r["pm_end"]:
            c = step["sub"].setdefault(sub_bucket(r["active"], n), [0, 0.0, 0.0])
            c[0] += 1
            c[1] += seconds
            c[2] += r["active"]
            if step["sub_min"] == 0 or seconds < step["sub_min"]:
                step["sub_min"] = seconds
        remaining = sum(1 for a in a_outputs if a > r["a"] * (1 + 1e-9))
        if r["pm_end"] and len(outputs) < len(a_outputs) - remaining:   # an output was written here: its io
            outputs.append(r["io"])
        ln_a = math.log(r["a"])
        if r["pm_end"]:
            ph = r["phases"]
            follows = sum(ph.get(k, 0.0) for k in ("p2p", "walk", "m2l", "pm", "tree"))
            history.append(dict(x=start, d=ln_a - start, end_seconds=seconds, end_pm=ph.get("pm", 0.0),
                                end_other=max(0.0, seconds - follows), **step))
            start, step = ln_a, fresh()
        if not history:
            r["model"] = None
            continue
        at_end = r["a"] >= a_end * (1 - 1e-9)
        here = r["pm_end"] and (at_end or any(abs(a - r["a"]) <= 1e-6 * a for a in a_outputs))
        w = [sec for j, sec in params["checks"] if j <= i]
        other = dict(remaining=remaining, each=sum(outputs) / len(outputs) if outputs else output_estimate,
                     checks=0, every=0, w=0.0, wait=0.0)
        if energy and w:
            other.update(checks=remaining + (0 if end_output or at_end else 1) + (1 if here else 0), every=every,
                         w=sum(w) / len(w))
        if ranks == 1 and end_output:
            writer = [sec for j, sec in params["writer"] if j <= i]
            other["wait"] = max(0.0, (sum(writer) / len(writer) if writer else files_estimate) - other["w"])
        r["model"] = (forecast_seconds(history, forecast, ln_a, math.log(a_end), other) if hierarchical
                      else trend_seconds(history, ln_a, math.log(a_end), other))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in sys.argv[1:] if a.startswith("--"))
    if len(args) != 1:
        sys.exit(__doc__)
    start = float(opts.get("from", 0.1))
    min_left = float(opts.get("min-left", 30))
    rows, a_begin, a_outputs, a_end, params, forecast_line = read_log(args[0])
    if len(rows) < 2:
        sys.exit(f"{args[0]}: fewer than two step lines with an ETA")
    key = "eta"
    if "replay" in opts:
        if a_begin is None:
            sys.exit(f"{args[0]}: no 'run from a = ...' line to replay from")
        est = float(opts["output-estimate"]) if "output-estimate" in opts else None
        replay(rows, a_begin, a_outputs, a_end, est, params, forecast_line)
        key = "model"
    t0 = rows[0]["t"] - rows[0]["seconds"]
    t_end = rows[-1]["t"] if opts.get("to") == "steps" or params["finish"] is None else params["finish"]
    print(f"{args[0]}: {len(rows)} step lines, {t_end - t0:.0f} s to the {'last step line' if t_end == rows[-1]['t'] else 'end'}; "
          f"{'replayed with cost_model.cpp' if key == 'model' else 'the ETA the run printed'}")
    print(" done   step   ETA(s)  true(s)  error")
    worst, marks = None, [0.1, 0.25, 0.5, 0.75]
    for r in rows:
        frac, true, eta = (r["t"] - t0) / (t_end - t0), t_end - r["t"], r[key]
        if eta is None or true <= 0:
            continue
        err = (eta - true) / true
        if marks and frac >= marks[0]:
            print(f"{100 * frac:4.0f}%  {r['step']:5d}  {eta:7.0f}  {true:7.0f}  {100 * err:+6.1f}%")
            marks.pop(0)
        if true < min_left:
            continue
        if frac >= start and (worst is None or abs(err) > abs(worst[0])):
            worst = (err, r["step"], eta, true, frac)
    if worst:
        err, step, eta, true, frac = worst
        print(f"worst from {100 * start:.0f}% on: {100 * err:+.1f}% at step {step} ({100 * frac:.0f}% done: "
              f"ETA {eta:.0f} s, {true:.0f} s remained)")


if __name__ == "__main__":
    main()
