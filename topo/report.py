"""Results of a lab run: summary.json, summary.md and PNG plots (matplotlib, Agg).

summary.json holds the scenario (paths, capacity_bps, the ideal link, the single-best
choice, how goodput is measured) and per configuration: config, goodput_bps (the whole
run), efficiency (goodput / sum of path rates), vs_ideal (goodput / the ideal
configuration's goodput), goodput_steady_bps and steady_vs_ideal (the same from
traffic.omit on), longest_stall_s (the longest spell of 0.1 s receiver intervals without
a byte), retransmits, reordered_ratio (Plait's configurations; null for the
others), per_path_bytes, owd_mean_ms per path, and the time series behind the plots.
"""

import json
import math
import os
import platform

TUNNEL = ("rr", "wrr", "auto")
PLOTS = ["goodput.png", "share.png", "owd.png", "reorder_extent.png"]


def describe_path(p):
    """A path of the plan in a few words: its rate or trace, delay, loss, queue."""
    if p.get("trace_down"):
        rate = "trace %s" % os.path.basename(p["trace_down"])
        if p.get("trace_offset_ns"):
            rate += " from %gs" % (p["trace_offset_ns"] / 1e9)
        if p.get("rate_bps"):
            rate += " under %s" % fmt_rate(p["rate_bps"])
        rate += " (mean %s)" % fmt_rate(p.get("capacity_bps"))
    else:
        rate = fmt_rate(p["rate_bps"])
    s = "%s %s %g ms queue %d" % (p["name"], rate, p["delay_ns"] / 1e6, p["queue"])
    if p.get("ge"):
        s += ", bursty loss %.3g %%" % (100 * p["loss"])
    elif p.get("loss"):
        s += ", loss %.3g %%" % (100 * p["loss"])
    return s


def fmt_rate(bps):
    if bps is None or (isinstance(bps, float) and math.isnan(bps)):
        return "-"
    # Rounded to three digits before the unit is chosen: 999.6 kbit/s is "1 Mbit/s", not
    # "1e+03 kbit/s" (K1's wrr row read so).
    bps = float("%.3g" % bps)
    for unit, m in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= m:
            return "%.3g %s" % (bps / m, unit)
    return "%.0f bit/s" % bps


def fmt_pct(x):
    return "-" if x is None else "%.1f %%" % (100 * x)


def result_line(res, capacity):
    s = "goodput %s (%.1f %% of capacity), longest stall %.1f s, %d retransmissions" % (
        fmt_rate(res.get("goodput_bps", 0)),
        100 * res.get("goodput_bps", 0) / capacity,
        res.get("longest_stall_s", 0),
        res.get("retransmits", 0),
    )
    if res.get("reordered_ratio") is not None:
        s += ", %.1f %% reordered" % (100 * res["reordered_ratio"])
    return s


def summarize(plan, results, switch_kind):
    sc = plan["scenario"]
    cap = sc["capacity_bps"]
    ideal = next((r for r in results if r["config"] == "ideal"), None)
    configs = []
    for r in results:
        c = {k: v for k, v in r.items() if k != "series"}
        c["efficiency"] = r["goodput_bps"] / cap
        c["vs_ideal"] = r["goodput_bps"] / ideal["goodput_bps"] if ideal else None
        c["steady_vs_ideal"] = (
            r["goodput_steady_bps"] / ideal["goodput_steady_bps"] if ideal else None
        )
        configs.append(c)
    return {
        "scenario": sc["name"],
        "description": sc.get("description", ""),
        "shape": sc["shape"],
        "encap": sc["encap"],
        "switch": switch_kind,
        "paths": sc["paths"],
        "dynamic": sc.get("dynamic"),
        "capacity_bps": cap,
        "ideal_link": plan["ideal"],
        "single_best": plan["single_best"],
        "traffic": sc["traffic"],
        "goodput_rule": (
            "iperf3 receiver bytes over the whole run, the same for every configuration; "
            "with repeat > 1 the run with the median goodput stands for its configuration; "
            "steady: the receiver's intervals starting at or after %gs, the median of the "
            "runs' figures; longest stall: the longest spell of 0.1 s intervals without a "
            "byte" % sc["traffic"]["omit_s"]
        ),
        "repeat": plan.get("repeat", 1),
        "lab": {
            "plait_version": plan.get("plait_version", "unknown"),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
        },
        "configs": configs,
        "plots": PLOTS,
        "series": {r["config"]: r.get("series", {}) for r in results},
    }


def spread(c):
    """' (min-max of N)' when a configuration ran more than once (goodput is the median)."""
    runs = c.get("goodput_runs_bps")
    if not runs:
        return ""
    return " (%s to %s, %d runs)" % (
        fmt_rate(min(runs)),
        fmt_rate(max(runs)),
        len(runs),
    )


def markdown_table(summary):
    names = [p["name"] for p in summary["paths"]]
    head = [
        "configuration",
        "goodput",
        "goodput / capacity",
        "goodput / ideal",
        "steady / ideal",
        "longest stall (s)",
        "retransmissions",
        "reordered",
        "rtt (ms)",
    ]
    head += ["owd %s (ms)" % n for n in names]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in summary["configs"]:
        cells = [
            c["config"],
            fmt_rate(c["goodput_bps"]) + spread(c),
            fmt_pct(c["efficiency"]),
            fmt_pct(c["vs_ideal"]),
            fmt_pct(c["steady_vs_ideal"]),
            "%.1f" % c.get("longest_stall_s", 0),
            str(c["retransmits"]),
            fmt_pct(c["reordered_ratio"]),
            "-" if c.get("rtt_ms") is None else "%.0f" % c["rtt_ms"],
        ]
        for n in names:
            v = (c.get("owd_mean_ms") or {}).get(n)
            cells.append("-" if v is None else "%.1f" % v)
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def fmt_tcp(traffic, lead):
    """The hosts' TCP knobs of a scenario (traffic.tcp), after lead; "" when it sets none."""
    knobs = traffic.get("tcp") or {}
    if not knobs:
        return ""
    return lead + " ".join("tcp_%s=%d" % kv for kv in sorted(knobs.items()))


def write(out, summary, results):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(clean(summary), f, indent=2, default=_json_default, allow_nan=False)
    t = summary["traffic"]
    md = [
        "# %s" % summary["scenario"],
        "",
        summary.get("description", ""),
        "",
        "Paths: "
        + ", ".join(describe_path(p) for p in summary["paths"])
        + "; capacity %s." % fmt_rate(summary["capacity_bps"]),
        "%s %s flow%s for %g s%s; goodput: %s. Shape %s, Plait in %s, %s switches; plait %s, kernel %s."
        % (
            "One" if t.get("flows", 1) == 1 else t["flows"],
            t["cc"],
            "" if t.get("flows", 1) == 1 else "s",
            t["duration_s"],
            fmt_tcp(t, "; hosts' "),
            summary["goodput_rule"],
            summary["shape"],
            summary["encap"].upper(),
            summary["switch"],
            summary["lab"]["plait_version"],
            summary["lab"]["kernel"],
        ),
        "Ideal: one link of %s at %g ms, queue %d packets. Single best: path %s (%s)."
        % (
            "the paths' capacities merged"
            if summary.get("dynamic")
            else fmt_rate(summary["ideal_link"]["rate_bps"]),
            summary["ideal_link"]["delay_ns"] / 1e6,
            summary["ideal_link"]["queue"],
            summary["single_best"]["name"],
            summary["single_best"]["reason"],
        ),
        "",
        markdown_table(summary),
        "",
    ]
    steps = (summary.get("dynamic") or {}).get("steps") or []
    if steps:
        md += ["Events (every configuration, from the flow's start):", ""]
        md += ["- %gs: %s" % (st["at_s"], st["what"]) for st in steps] + [""]
    warnings = [
        (c["config"], w) for c in summary["configs"] for w in c.get("warnings", [])
    ]
    if warnings:
        md += ["Warnings:", ""] + ["- %s: %s" % cw for cw in warnings] + [""]
    md += [
        "![goodput](goodput.png)",
        "![share](share.png)",
        "![owd](owd.png)",
        "![reordering](reorder_extent.png)",
        "",
    ]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md))
    plot_all(out, summary)


def _json_default(o):
    raise TypeError("not JSON: %r" % (o,))


def clean(v):
    """NaN and infinities become None so that summary.json is strict JSON."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v


def plot_all(out, summary):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_goodput(plt, out, summary)
    plot_series(plt, out, summary, "share.png", share=True)
    plot_series(plt, out, summary, "owd.png", share=False)
    plot_reorder(plt, out, summary)


def plot_goodput(plt, out, summary):
    cs = summary["configs"]
    fig, ax = plt.subplots(figsize=(7, 4))
    x = range(len(cs))
    ax.bar(x, [c["goodput_bps"] / 1e6 for c in cs], color="#4a7ebb")
    for i, c in enumerate(cs):  # every run when there were several (bar: the median)
        runs = c.get("goodput_runs_bps") or []
        ax.plot([i] * len(runs), [r / 1e6 for r in runs], "k.", ms=4)
    ax.axhline(
        summary["capacity_bps"] / 1e6,
        color="k",
        ls="--",
        lw=1,
        label="sum of path rates",
    )
    for i, c in enumerate(cs):
        ax.text(
            i,
            c["goodput_bps"] / 1e6,
            "%.0f%%" % (100 * c["efficiency"]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(list(x))
    ax.set_xticklabels([c["config"] for c in cs])
    ax.set_ylabel("goodput over the whole run (Mbit/s)")
    ax.set_title("%s: goodput per configuration" % summary["scenario"])
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "goodput.png"), dpi=100)
    plt.close(fig)


def plot_series(plt, out, summary, name, share):
    cs = summary["configs"]
    paths = [p["name"] for p in summary["paths"]]
    dyn = summary.get("dynamic")
    rows = len(cs) + (1 if dyn else 0)
    fig, axes = plt.subplots(
        rows, 1, figsize=(8, 1.9 * rows + 0.6), sharex=True, squeeze=False
    )
    if dyn:
        plot_capacity(axes[-1, 0], summary)
    for ax, c in zip(axes[:, 0], cs):
        s = summary["series"].get(c["config"], {})
        if share:
            t = s.get("t", [])
            rates = s.get("rate_bps", {})
            keys = [k for k in rates if rates[k]]
            tot = [sum(rates[k][i] for k in keys) for i in range(len(t))]
            if keys and t:
                shares = [
                    [rates[k][i] / tot[i] if tot[i] > 0 else 0 for i in range(len(t))]
                    for k in keys
                ]
                ax.stackplot(t, shares, labels=keys)
                w = s.get("weight", {})
                if (
                    c["config"] in TUNNEL
                    and any(v > 0 for k in keys for v in w.get(k, []))
                    and s.get("weight_t")
                ):
                    acc = [0.0] * len(s["weight_t"])
                    for k in keys:
                        acc = [a + b for a, b in zip(acc, w.get(k, []))]
                        ax.plot(
                            s["weight_t"][: len(acc)], acc, color="k", lw=0.7, ls=":"
                        )
            ax.set_ylim(0, 1)
            ax.set_ylabel("share")
            if keys:
                ax.legend(loc="upper right", fontsize=7, ncol=len(keys))
        else:
            t = s.get("agent_t", [])
            for k in paths:
                v = s.get("owd_ms", {}).get(k, [])
                ax.plot(t[: len(v)], v, label=k)
            ax.set_ylabel("OWD (ms)")
            ax.legend(loc="upper right", fontsize=7, ncol=len(paths))
        ax.set_title(c["config"], fontsize=9, loc="left")
        ax.axvline(summary["traffic"]["omit_s"], color="grey", lw=0.5)
    axes[-1, 0].set_xlabel("time since the flow started (s)")
    fig.suptitle(
        "%s: %s"
        % (
            summary["scenario"],
            "per-path share of h1's bytes (dotted: cumulative weights)"
            if share
            else "one-way delay per path measured at h2 (data or probes)",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)
    plt.close(fig)


def plot_capacity(ax, summary):
    """Each path's capacity over time, from its trace and the events: the same for every
    configuration, drawn under their shares and delays."""
    dyn = summary["dynamic"]
    bin_s = dyn["capacity_bin_s"]
    for p in summary["paths"]:
        v = dyn["capacity_bps"].get(p["name"], [])
        ax.step(
            [bin_s * i for i in range(len(v))],
            [x / 1e6 for x in v],
            where="post",
            lw=0.8,
            label=p["name"],
        )
    for st in dyn.get("steps") or []:
        ax.axvline(st["at_s"], color="r", lw=0.5, ls=":")
    ax.set_ylabel("capacity (Mbit/s)")
    ax.set_title(
        "paths' capacity (traces and events; dotted: events)", fontsize=9, loc="left"
    )
    ax.legend(loc="upper right", fontsize=7, ncol=len(summary["paths"]))


def plot_reorder(plt, out, summary):
    cs = [c for c in summary["configs"] if c.get("reorder")]
    fig, ax = plt.subplots(figsize=(7, 4))
    if not cs:
        ax.text(
            0.5,
            0.5,
            "no Plait configuration ran",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    full = max((len(c["reorder"]["extent_hist"]) for c in cs), default=0)
    # Buckets up to the last one used (and one more), so the bars stay readable.
    used = [i for c in cs for i, v in enumerate(c["reorder"]["extent_hist"]) if v > 0]
    nb = min(full, max(used, default=0) + 2)
    width = 0.8 / max(len(cs), 1)
    for j, c in enumerate(cs):
        h = c["reorder"]["extent_hist"][:nb]
        ax.bar(
            [i + j * width for i in range(len(h))], h, width=width, label=c["config"]
        )
    if nb:
        ax.set_xticks([i + 0.4 - width / 2 for i in range(nb)])
        ax.set_xticklabels(
            ["%d" % (1 << i) + ("+" if i == full - 1 else "") for i in range(nb)],
            fontsize=7,
        )
        if any(v > 0 for c in cs for v in c["reorder"]["extent_hist"]):
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("reordering extent (packets, bucket [2^i, 2^(i+1)))")
    ax.set_ylabel("reordered packets")
    ax.set_title("%s: RFC 4737 reordering extent at h2" % summary["scenario"])
    fig.tight_layout()
    fig.savefig(os.path.join(out, "reorder_extent.png"), dpi=100)
    plt.close(fig)


def plot_sweep(out):
    """sweep.png from a sweep's sweep.json (plait lab sweep): for each ratio auto is
    judged by, every scenario's value in order (an empirical distribution), loss-free
    scenarios filled and lossy ones hollow, with the target's line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(out, "sweep.json")) as f:
        sw = json.load(f)
    rows = sw.get("distribution") or []
    fig, axes = plt.subplots(
        1, max(len(rows), 1), figsize=(4 * max(len(rows), 1), 3.8), squeeze=False
    )
    for ax, row in zip(axes[0], rows):
        base = row["ratio"].split("/", 1)[1]
        pts = []
        for s in sw["scenarios"]:
            g = s.get("goodput_bps") or {}
            if g.get("auto") is not None and g.get(base):
                pts.append((g["auto"] / g[base], s.get("loss_free", False)))
        pts.sort()
        n = len(pts)
        for i, (v, loss_free) in enumerate(pts):
            ax.plot(
                v,
                (i + 1) / n,
                "o",
                color="#4a7ebb",
                mfc="#4a7ebb" if loss_free else "none",
                ms=5,
            )
        ax.step(
            [v for v, _ in pts],
            [(i + 1) / n for i in range(n)],
            where="post",
            color="#4a7ebb",
            lw=0.8,
        )
        ax.axvline(row["threshold"], color="k", ls="--", lw=1)
        ax.set_xlabel(row["ratio"])
        ax.set_ylim(0, 1.05)
        ax.set_title(
            "min %s, p10 %s, median %s\n%s: %d of %d"
            % (
                tuple(
                    "-" if row[k] is None else "%.2f" % row[k]
                    for k in ("min", "p10", "median")
                )
                + (row["target"], row["met"], row["scope"])
            ),
            fontsize=7,
        )
    axes[0, 0].set_ylabel("share of scenarios at or below")
    fig.suptitle(
        "plait lab sweep, seed %d: %d scenarios (filled: loss-free; dashed: target)"
        % (sw["seed"], len(sw["scenarios"])),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sweep.png"), dpi=100)
    plt.close(fig)
