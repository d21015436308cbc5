"""``--plot PATH``: a PNG of time per row against its floor and the peers (matplotlib, optional extra ``plot``)."""
from __future__ import annotations


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401

        return True
    except Exception:
        return False


def _series(rows):
    """labels and {series: values} for rows with ours, floor and peers."""
    labels = [r[0] for r in rows]
    series = {"cake-rt": [r[1] for r in rows], "floor": [r[2] for r in rows]}
    for n in sorted({n for _, _, _, p in rows for n in p}):
        series[n] = [r[3].get(n) for r in rows]
    return labels, series


def _panels(doc: dict):
    """[(title, labels, {series: [ms or None]})] for the tables present in ``doc``."""
    recs = [r for r in doc.get("records", []) if not r.get("error") and "ms" in r]
    peers_of = lambda r: {n: p["ms"]["median"] for n, p in r.get("peers", {}).items() if "ms" in p}  # noqa: E731
    panels = []
    ssd = [r for r in recs if r["table"] == "ssd"]
    if ssd:
        panels.append(("SSD combined", *_series([(r["row"], r["ms"]["median"], r.get("floor_ms"), peers_of(r))
                                                 for r in ssd])))
    for h in sorted({r["heads"] for r in recs if r["table"] == "dsa"}):
        rows = [r for r in recs if r["table"] == "dsa" and r["heads"] == h and r["arm"] == "prepared"]
        if rows:
            panels.append((f"DSA indexer top-k, H = {h} (prepared runner)",
                           *_series([(r["row"], r["ms"]["median"], r.get("floor_ms"), peers_of(r)) for r in rows])))
    side = [r for r in recs if r["table"] == "side_stream"]
    if side:
        labels = list(dict.fromkeys(f"{r['row']} H{r['heads']}, {r.get('hold')} SMs held" for r in side))
        series = {}
        for r in side:
            series.setdefault(f"{r['arm']} schedule", [None] * len(labels))[
                labels.index(f"{r['row']} H{r['heads']}, {r.get('hold')} SMs held")] = r["ms"]["median"]
        panels.append(("Side stream: SMs held by a spinning kernel on a second stream", labels, series))
    sc = [r for r in recs if r["table"] == "selfcheck"]
    if sc:
        panels.append(("Runner self-check", *_series([(f"{r['row']}, {r.get('hold')} SMs held", r["ms"]["median"],
                                                       r.get("floor_ms"), peers_of(r)) for r in sc])))
    return panels


def _figure(path: str, panels: list, *, ylabel: str, bars, ref_line=None) -> None:
    """One log-scale bar panel per (title, labels, {series: values}); ``bars(ax, name, [(x, v)], width)``
    draws one series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.5 * len(panels)), squeeze=False)
    for ax, (title, labels, series, gpu) in zip(axes[:, 0], panels):
        series = [(n, v) for n, v in series.items() if any(x is not None for x in v)]
        width = 0.8 / max(1, len(series))
        for i, (name, vals) in enumerate(series):
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
            bars(ax, name, [(x, v) for x, v in zip(xs, vals) if v is not None], width)
        if ref_line is not None:
            ax.axhline(ref_line, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        many = len(labels) > 8 or max(len(t) for t in labels) > 14
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=25 if many else 0, ha="right" if many else "center", fontsize=8)
        ax.set_title(f"{title} -- {gpu}", fontsize=9)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _gpu(doc: dict) -> str:
    return doc.get("machine", {}).get("gpu", {}).get("name", "?")


def write_plot(doc: dict, path: str) -> None:
    """Bars (log scale): cake-rt, its floor and each peer, per row; one panel per table."""
    panels = _panels(doc)
    if not panels:
        raise ValueError("plot: no measured rows to draw")

    def bars(ax, name, pts, width):
        floor = name == "floor"
        ax.bar([x for x, _ in pts], [v for _, v in pts], width, label=name, hatch="//" if floor else None,
               color="none" if floor else None, edgecolor="black" if floor else None)

    _figure(path, [(*pn, _gpu(doc)) for pn in panels], ylabel="ms (median)", bars=bars)


def _speedup_panels(doc: dict):
    """[(title, labels, {peer: [speedup or None]})]: peer GPU time / cake-rt GPU time, per row."""
    recs = [r for r in doc.get("records", []) if not r.get("error") and "ms" in r]
    panels = []
    groups = [("SSD combined: cake-rt speedup over each peer (GPU time)", [r for r in recs if r["table"] == "ssd"])]
    for h in sorted({r["heads"] for r in recs if r["table"] == "dsa"}):
        groups.append((f"DSA indexer top-k, H = {h}: prepared runner speedup over each peer (GPU time)",
                       [r for r in recs if r["table"] == "dsa" and r["heads"] == h and r["arm"] == "prepared"]))
    for title, rows in groups:
        peers = list(dict.fromkeys(n for r in rows for n, p in r.get("peers", {}).items() if "ms" in p))
        if not rows or not peers:
            continue
        series = {}
        for n in peers:
            vals = []
            for r in rows:
                p = r.get("peers", {}).get(n, {})
                ok = p.get("check", {}).get("ok", True)
                vals.append(p["ms"]["median"] / r["ms"]["median"] if "ms" in p and ok and r["ms"]["median"] > 0
                            else None)
            series[n] = vals
        panels.append((title, [r["row"] for r in rows], series))
    return panels


def write_speedup_plot(doc: dict, path: str) -> None:
    """Bars (log scale) of cake-rt's speedup over each peer per row, with the 1x line; one panel per table."""
    panels = _speedup_panels(doc)
    if not panels:
        raise ValueError("speedup plot: no row has a measured peer")

    def bars(ax, name, pts, width):
        drawn = ax.bar([x for x, _ in pts], [v for _, v in pts], width, label=f"vs {name}")
        for b, (_, v) in zip(drawn, pts):
            ax.annotate(f"{v:.2g}x", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7)

    _figure(path, [(*pn, _gpu(doc)) for pn in panels], ylabel="speedup (peer ms / cake-rt ms)", bars=bars,
            ref_line=1.0)
