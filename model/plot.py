"""Plot a `plait model sweep` (seed 002's Fig. 7 or 8 style) or a `plait model validate`
as PNG.

Usage: python3 - DATA.json OUT.png   (the plait binary pipes this script on stdin)

DATA.json is {"figure": 7 or 8, "points": [SweepPoint, ...]} as written by the sweep.
Fig. 8: one column per minimum delay, throughput against ADA, a line per link count;
Fig. 7: one column per link count, throughput over ADA x ABA as a heat map. The top row
is the paper's model, the bottom row Plait's predictor (rr): their scales differ by
orders of magnitude, so each row has its own.

A validation is {"figure": "validate", "target": 0.9, "points": [...]}: one column per
group of points (the scenarios, an ADA sweep), the lab's goodput and both models'
predictions per configuration on top, their accuracy (eq. 24) with the target below.
"""

import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    print(f"matplotlib is missing ({e}); install python3-matplotlib", file=sys.stderr)
    sys.exit(3)

MODELS = [("paper_bps", "paper (rr)"), ("plait_bps", "Plait predictor (rr)")]


def fig8(points):
    delays = sorted({p["min_delay_s"] for p in points})
    links = sorted({p["links"] for p in points})
    fig, axes = plt.subplots(
        len(MODELS),
        len(delays),
        figsize=(4 * len(delays), 6.5),
        squeeze=False,
        layout="constrained",
    )
    for row, (key, label) in enumerate(MODELS):
        for col, d in enumerate(delays):
            ax = axes[row][col]
            for n in links:
                pts = sorted(
                    (p for p in points if p["min_delay_s"] == d and p["links"] == n),
                    key=lambda p: p["ada_s"],
                )
                ax.plot(
                    [p["ada_s"] * 1e3 for p in pts],
                    [p[key] / 1e3 for p in pts],
                    marker="o",
                    ms=3,
                    label=f"{n} link{'s' if n > 1 else ''}",
                )
            ax.set_title(f"{label}, min delay {d * 1e3:g} ms", fontsize=9)
            ax.set_xlabel("ADA (ms)")
            ax.set_ylabel("throughput (kbit/s)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    return fig


def fig7(points):
    links = sorted({p["links"] for p in points})
    adas = sorted({p["ada_s"] for p in points})
    abas = sorted({p["aba_bps"] for p in points})
    fig, axes = plt.subplots(
        len(MODELS),
        len(links),
        figsize=(4 * len(links), 6.5),
        squeeze=False,
        layout="constrained",
    )
    for row, (key, label) in enumerate(MODELS):
        vmax = max(p[key] for p in points) / 1e3
        for col, n in enumerate(links):
            grid = [[0.0] * len(adas) for _ in abas]
            for p in points:
                if p["links"] == n:
                    grid[abas.index(p["aba_bps"])][adas.index(p["ada_s"])] = (
                        p[key] / 1e3
                    )
            ax = axes[row][col]
            im = ax.imshow(
                grid,
                origin="lower",
                aspect="auto",
                vmin=0,
                vmax=vmax,
                extent=[
                    adas[0] * 1e3,
                    adas[-1] * 1e3,
                    abas[0] / 1e3,
                    abas[-1] / 1e3,
                ],
            )
            ax.set_title(f"{label}, {n} link{'s' if n > 1 else ''}", fontsize=9)
            ax.set_xlabel("ADA (ms)")
            ax.set_ylabel("ABA (kbit/s)")
        fig.colorbar(im, ax=list(axes[row]), label="throughput (kbit/s)")
    return fig


FLOOR = -50


def accuracy(ax, x, acc, label, kw, ls="-"):
    ys = [max(FLOOR, 100 * a) for a in acc]
    ax.plot(x, ys, ls=ls, label=label, **kw)
    for xi, a in zip(x, acc):
        if 100 * a < FLOOR:
            ax.annotate("%.0f %%" % (100 * a), (xi, FLOOR), fontsize=7, va="bottom")


def validate(points, target):
    groups = list(dict.fromkeys(p["group"] for p in points))
    configs = list(dict.fromkeys(p["config"] for p in points))
    colors = {c: "C%d" % i for i, c in enumerate(configs)}
    fig, axes = plt.subplots(
        2,
        len(groups),
        figsize=(max(5, 0.7 * len(points) / len(groups)) * len(groups), 7),
        squeeze=False,
        layout="constrained",
    )
    # A run that collapsed can make an accuracy any negative number: the axis stops at
    # FLOOR and such points sit on it with their value written beside.
    low = max(FLOOR, min([0] + [100 * p["plait"]["accuracy"] for p in points]))
    for col, g in enumerate(groups):
        pts = [p for p in points if p["group"] == g]
        labels = list(dict.fromkeys(p["label"] for p in pts))
        top, bottom = axes[0][col], axes[1][col]
        for c in configs:
            cp = [p for p in pts if p["config"] == c]
            if not cp:
                continue
            x = [labels.index(p["label"]) for p in cp]
            kw = dict(color=colors[c], marker="o", ms=4)
            top.plot(x, [p["measured_bps"] / 1e6 for p in cp], label=c + " lab", **kw)
            top.plot(
                x,
                [p["plait"]["predicted_bps"] / 1e6 for p in cp],
                ls="--",
                label=c + " Plait",
                **kw,
            )
            accuracy(bottom, x, [p["plait"]["accuracy"] for p in cp], c + " Plait", kw)
            pp = [p for p in cp if p.get("paper")]
            if pp:
                xp = [labels.index(p["label"]) for p in pp]
                kw["marker"] = "x"
                top.plot(
                    xp,
                    [p["paper"]["predicted_bps"] / 1e6 for p in pp],
                    ls=":",
                    label=c + " paper",
                    **kw,
                )
                accuracy(
                    bottom, xp, [p["paper"]["accuracy"] for p in pp], c + " paper", kw, ":"
                )
        bottom.axhline(100 * target, color="k", lw=0.8, ls="--")
        bottom.text(0, 100 * target, " target", va="bottom", fontsize=7)
        bottom.set_ylim(low - 5, 105)
        for ax in (top, bottom):
            ax.set_xticks(range(len(labels)), labels, fontsize=8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        top.set_title(g, fontsize=9)
        top.set_ylabel("goodput (Mbit/s)")
        bottom.set_ylabel("accuracy, eq. (24) (%)")
    return fig


def main():
    if len(sys.argv) != 3:
        print("usage: python3 - SWEEP.json OUT.png", file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1]) as f:
        data = json.load(f)
    if data["figure"] == "validate":
        fig = validate(data["points"], data["target"])
    else:
        fig = (fig7 if data["figure"] == 7 else fig8)(data["points"])
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
