"""Named workloads with the papers' parameters.

Time unit: microseconds.  ``rate`` is the *event-time density* (base tuples
per second of event time); the papers' arrival rates v (Scale-OIJ Table II)
are how fast the recorded streams were *replayed* into the engine, which is
a property of the benchmark driver, not of the stream.  We keep v in
``arrival_rate`` for the driver and calibrate the density so that the
number of matches per window is the one the paper quotes (§III-C): for a
uniform key distribution, matches per window = probe_rate × |w| / u.

Scale-OIJ joins are aggregated (Def. 2: "the join results are aggregated",
OpenMLDB features), so the Scale-OIJ presets set ``aggregate=sum``; PPOIJ
emits join pairs.  See docs/workloads.rst for the table of paper values and
the values used here.
"""

from __future__ import annotations

from dataclasses import replace

from oij.workloads.params import WorkloadParams, check_params

S = 1_000_000  # us per second


def _scale_oij_real(
    name: str,
    keys: int,
    window_s: float,
    lateness_s: float,
    matches: float,
    delay_fraction: float,
    arrival_rate: float | None,
    text: str,
    scaled: str = "nothing",
) -> WorkloadParams:
    window = round(window_s * S)
    rate = matches * keys / window_s  # probes per second of event time: matches = rate * |w| / u
    lat = round(lateness_s * S)
    return WorkloadParams(
        description=f"{text} Scaled: {scaled}.",
        source=f"Scale-OIJ Table II and §III-C, {name}",
        keys=keys,
        key_dist="uniform",
        rate=rate,
        delay="uniform",
        delay_max=lat,
        delay_fraction=delay_fraction,
        watermark="lateness",
        lateness=lat,
        lower=-window,
        upper=0,
        aggregate="sum",
        arrival_rate=arrival_rate,
        events=1_000_000,
    )


_DEFAULT = WorkloadParams(
    description="Scale-OIJ's default synthetic workload (Fig. 7-13): 100 keys, window 1000 us "
    "(lower=-1000, upper=0), lateness 100 us, 16 joiners in the paper. The paper gives no rate; we use "
    "1e6 base + 1e6 probe tuples per second of event time (one tuple per us per stream), which gives "
    "10 matches per window and keeps integer-us timestamps mostly distinct within a key. Every tuple is "
    "delayed uniformly in [0, lateness], so disorder uses the whole lateness bound and nothing is late.",
    source="Scale-OIJ Table IV (§IV-B)",
    keys=100,
    rate=1_000_000.0,
    delay="uniform",
    delay_max=100,
    watermark="lateness",
    lateness=100,
    lower=-1000,
    upper=0,
    aggregate="sum",
    events=1_000_000,
)

_PPOIJ = WorkloadParams(
    description="PPOIJ §5 with uniform keys: K=50 keys (Figs. 13, 15), interval I=10 s taken as "
    "lower=-I, upper=0 (the paper does not say how I is split), pairs. Two base and three probe "
    "channels as in Fig. 3, each emitting a bounded-out-of-orderness watermark (max ts - 1 s) after every "
    "32 of its tuples (b=32, the paper's default batch). The paper's sources run at the fastest "
    "sustainable speed over Stock/Rovio traces; we use 100 tuples/s per stream of event time "
    "(20 matches per window), delays uniform in [0, 1 s].",
    source="PPOIJ §5 'Workloads', Fig. 3, Fig. 10",
    keys=50,
    key_dist="uniform",
    rate=100.0,
    delay="uniform",
    delay_max=S,
    watermark="count",
    lateness=S,
    watermark_every=32,
    base_channels=2,
    probe_channels=3,
    lower=-10 * S,
    upper=0,
    events=1_000_000,
)

_TEACH = WorkloadParams(
    description="",
    keys=3,
    key_type="str",
    rate=100_000.0,  # one tuple every 5 us on average (both streams)
    delay="uniform",
    delay_max=5,
    watermark="lateness",
    lateness=5,
    lower=-20,
    upper=0,
    events=30,
)

PRESETS: dict[str, WorkloadParams] = {
    "scale-oij-a": _scale_oij_real(
        "Workload A",
        keys=5,
        window_s=1,
        lateness_s=1,
        matches=4000,
        delay_fraction=0.1,
        arrival_rate=120_000,
        text="Logistics, Workload A: v=120K/s (replay rate, kept in arrival_rate), u=5 keys, |w|=1 s, l=1 s; "
        "~4000 matches per window (density 20K tuples/s per stream); ~400 of the ~4000 tuples of a key in "
        "one lateness span are out of order (10% of tuples delayed uniformly in [0, l]).",
    ),
    "scale-oij-b": _scale_oij_real(
        "Workload B",
        keys=111,
        window_s=150,
        lateness_s=10,
        matches=600,
        delay_fraction=0.1,
        arrival_rate=200_000,
        text="Retail, Workload B: v=200K/s (arrival_rate), u=111 keys, |w|=150 s, l=10 s; large window.",
        scaled="density / 10: 600 matches per window instead of the paper's ~6000, so the oracle state is "
        "~140K tuples instead of ~1.4M (--param rate=4440 restores the paper's density)",
    ),
    "scale-oij-c": _scale_oij_real(
        "Workload C",
        keys=45,
        window_s=8,
        lateness_s=100,
        matches=300,
        delay_fraction=1.0,
        arrival_rate=None,
        text="Retail, Workload C: v=inf (replay as fast as possible), u=45 keys, |w|=8 s, l=100 s; "
        "~300 matches per window; large disorder: every tuple delayed uniformly in [0, l], so the lateness "
        "span holds ~7500 extra tuples per key (the paper: ~10,000 extra elements).",
    ),
    "scale-oij-d": _scale_oij_real(
        "Workload D",
        keys=5,
        window_s=1,
        lateness_s=2,
        matches=4000,
        delay_fraction=0.1,
        arrival_rate=15_000,
        text="Logistics, Workload D: like A (same data distribution) with v=15K/s (arrival_rate) and l=2 s.",
    ),
    "scale-oij-default": _DEFAULT,
    "scale-oij-synthetic": replace(
        _DEFAULT,
        description="Scale-OIJ's limitation workload (Fig. 21): many keys, small window and lateness: 1000 "
        "keys, window 100 us, lateness 100 us -> 10 us. Same rate as scale-oij-default (0.1 matches per "
        "window: most base tuples match nothing).",
        source="Scale-OIJ Table V (§V-D)",
        keys=1000,
        lower=-100,
        delay_max=10,
        lateness=10,
    ),
    "scale-oij-rotating": replace(
        _DEFAULT,
        description="Scale-OIJ Fig. 14: 10K keys, otherwise Table IV; a random set of hot keys changes "
        "periodically and every key gets the same total. The paper gives neither the hot-set size nor the "
        "period; we use 100 hot keys taking 80% of the tuples, a new hot set every 100 ms of event time "
        "(200K tuples), walking through a random permutation of the keys.",
        source="Scale-OIJ §V-B, Fig. 14",
        keys=10_000,
        key_dist="rotating",
        hot_keys=100,
        hot_share=0.8,
        hot_period=100_000,
    ),
    "ppoij-uniform": _PPOIJ,
    "ppoij-skewed": replace(
        _PPOIJ,
        description=_PPOIJ.description.replace(
            "uniform keys", "self-similar keys, skew factor s=0.35 (Figs. 11, 13)"
        ).replace("(20 matches per window)", "(20 matches per window if keys were uniform; ~60 with this skew)"),
        source="PPOIJ §5 'Workloads', Figs. 3, 11, 13",
        key_dist="self-similar",
        skew=0.35,
    ),
    "teach-tiny": replace(
        _TEACH,
        description="Teaching: 30 tuples, 3 keys k0..k2, window [-20, 0] us, lateness mode l=5 with delays "
        "in [0, 5]: small enough to check the join by hand.",
    ),
    "teach-watermarks": replace(
        _TEACH,
        description="Teaching: 2 base + 2 probe channels, each emitting max ts - 10 after every 2 of its "
        "tuples; delays in [0, 10]; 10% stragglers delayed by 11..210 us, past the bound: many are late.",
        base_channels=2,
        probe_channels=2,
        watermark="count",
        watermark_every=2,
        delay_max=10,
        lateness=10,
        stragglers=0.1,
        straggler_max=200,
        events=60,
    ),
    "teach-late": replace(
        _TEACH,
        description="Teaching: lateness mode l=5, 20% stragglers delayed by 6..45 us: shows late tuples.",
        stragglers=0.2,
        straggler_max=40,
        events=40,
    ),
    "teach-skew": replace(
        _TEACH,
        description="Teaching: 10 keys with Zipf(1.2) frequencies, 200 tuples: key k0 dominates.",
        keys=10,
        key_dist="zipf",
        skew=1.2,
        events=200,
    ),
    "teach-bursts": replace(
        _TEACH,
        description="Teaching: bursts of 10x the rate during the first 10% of every 200 us; count "
        "watermarks every 8 tuples; 100 tuples.",
        burst_factor=10.0,
        burst_period=200,
        burst_duty=0.1,
        watermark="count",
        watermark_every=8,
        events=100,
    ),
}

for _name, _p in PRESETS.items():
    check_params(_p)


def resolve(preset_or_params: str | WorkloadParams) -> WorkloadParams:
    """The params of a preset name, or the params themselves (validated)."""
    from oij.workloads.params import ParamError

    if isinstance(preset_or_params, WorkloadParams):
        return check_params(preset_or_params)
    p = PRESETS.get(preset_or_params)
    if p is None:
        raise ParamError("preset", f"unknown preset {preset_or_params!r} (known: {', '.join(PRESETS)})")
    return p
