"""The 2016 BFQ cover letter's table across policies, drawn with matplotlib.

Runs `elevator.letter` (the same runs as `elevator letter`): applications
starting against ten sequential or ten random readers on the letter's SSD,
under each policy, and draws our start-up times beside the letter's
figures (one panel per background; log scale, the letter's 60 s timeout as
a line). Headless: matplotlib's Agg backend writes a PNG.

    python python/examples/letter_table.py --out letter.png
    python python/examples/letter_table.py --sched bfq,deadline --out small.png   # CI's size
"""

import argparse
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import elevator  # noqa: E402


def letter_value(text):
    """The letter's printed figure as a number (">60" is the timeout)."""
    if text is None:
        return math.nan
    return float(text.lstrip(">"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="ssd-sata-2016")
    parser.add_argument("--sched", default="bfq,cfq,deadline,noop")
    parser.add_argument("--out", default="letter.png")
    args = parser.parse_args()

    table = elevator.letter(devices=[args.device], sched=args.sched).to_pandas()
    startups = table[(table["row"] != "throughput") & (table["background"] != "idle")]
    shown = startups[["background", "row", "scheduler", "value", "letter"]]
    print(shown.to_string(index=False, na_rep=">60"))
    throughput = table[table["row"] == "throughput"]
    print(throughput[["background", "scheduler", "value", "letter"]].to_string(index=False))

    policies = args.sched.split(",")
    apps = ["xterm", "oowriter", "konsole"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    width = 0.8 / len(policies)
    for ax, background in zip(axes, ["sequential", "random"]):
        rows = startups[startups["background"] == background]
        for k, policy in enumerate(policies):
            ours, theirs = [], []
            for app in apps:
                cell = rows[(rows["row"] == app) & (rows["scheduler"] == policy)]
                value = cell["value"].item() if len(cell) else math.nan
                ours.append(60.0 if value is None or math.isnan(value) else value)
                theirs.append(letter_value(cell["letter"].item() if len(cell) else None))
            xs = [i + (k - (len(policies) - 1) / 2) * width for i in range(len(apps))]
            bars = ax.bar(xs, ours, width, label=f"{policy} (ours)")
            ax.scatter(xs, theirs, marker="_", s=300, color="black", zorder=3,
                       label="the letter" if k == 0 else None)
            for bar, value in zip(bars, ours):
                ax.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value),
                            ha="center", va="bottom", fontsize=7)
        ax.axhline(60, color="grey", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(apps)), ["xterm", "LibreOffice Writer", "konsole*"])
        ax.set_title(f"against 10 {background} readers ({args.device})")
    axes[0].set_ylabel("start-up time, s (log)")
    axes[1].legend(fontsize=8, loc="upper left")
    fig.text(0.01, 0.01, "*gnome-terminal's trace stands in for konsole; "
             "bars: elevator's simulator; black ticks: the 2016 letter; dotted: its 60 s timeout",
             fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
