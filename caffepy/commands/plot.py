"""``caffepy plot LOG -o curves.png``: training curves from a Caffe / caffepy training log.

The log is read as Caffe's ``tools/extra/parse_log.py`` reads it (train outputs at display
iterations, test outputs at test iterations); the figure has one panel per kind with every output
against the iteration number, and the learning rate on a second axis of the train panel.
A distributed log (its ``Iteration N (group g of G): ...`` lines; ``LOG.rank<N>`` files beside
``LOG`` are read too) gives one loss curve and one steps/s curve per worker group.
matplotlib is imported here only (Agg backend, no display needed).
"""
import os

from ..errors import CaffeError

NAME = "plot"
HELP = "plot training curves (loss, accuracy, lr) from a training log"


def add_arguments(parser):
    parser.add_argument("log", help="a training log (caffepy train ... 2> LOG, or --log LOG)")
    parser.add_argument("-o", "--output", help="image to write (.png, .svg, .pdf); default LOG.png")
    parser.add_argument("--title", help="figure title (default: the log's file name)")


def _panel(ax, rows, title):
    names = [k for k in rows[0] if k not in ("NumIters", "Seconds", "LearningRate")]
    its = [r["NumIters"] for r in rows]
    for name in names:
        ax.plot(its, [r.get(name, float("nan")) for r in rows], label=name)
    ax.set_title(title)
    ax.set_xlabel("iteration")
    ax.grid(True, alpha=0.3)
    if names:
        ax.legend(loc="best")


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CaffeError("plot needs matplotlib (pip install matplotlib)")
    return plt


def _plot_groups(args, groups):
    """A distributed log (or its ``.rank<N>`` files): loss and steps/s per worker group, lr."""
    plt = _pyplot()
    output = args.output or args.log + ".png"
    fig, (loss_ax, rate_ax) = plt.subplots(2, 1, figsize=(8, 8), squeeze=True)
    for g in sorted(groups):
        rows = groups[g]
        its = [r["NumIters"] for r in rows]
        loss_ax.plot(its, [r["loss"] for r in rows], label="worker group %d" % g)
        rate_ax.plot(its, [r["StepsPerSecond"] for r in rows], label="worker group %d" % g)
    first = groups[min(groups)]
    lr_ax = loss_ax.twinx()
    lr_ax.plot([r["NumIters"] for r in first], [r["LearningRate"] for r in first], "k:", label="lr")
    lr_ax.set_ylabel("learning rate")
    for ax, title in ((loss_ax, "train loss"), (rate_ax, "steps/s")):
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best")
    fig.suptitle(args.title or os.path.basename(args.log))
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)
    print("wrote %s (%d worker groups)" % (output, len(groups)))
    return 0


def run(args):
    from ..dist.report import log_files, parse_group_log
    from ..log import parse_training_log
    if not log_files(args.log):
        raise CaffeError("%s: no such file" % args.log)
    groups = parse_group_log(args.log)
    if groups:
        return _plot_groups(args, groups)
    try:
        train, test = parse_training_log(args.log)
    except ValueError as e:
        raise CaffeError(str(e))
    if not train and not test:
        raise CaffeError("%s: no 'Train net output' or 'Test net output' lines to plot" % args.log)
    plt = _pyplot()
    output = args.output or args.log + ".png"
    panels = [(rows, title) for rows, title in ((train, "train"), (test, "test")) if rows]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 4 * len(panels)), squeeze=False)
    for ax, (rows, title) in zip(axes[:, 0], panels):
        _panel(ax, rows, title)
    if train:
        lr_ax = axes[0, 0].twinx()
        lr_ax.plot([r["NumIters"] for r in train], [r["LearningRate"] for r in train], "k:", label="lr")
        lr_ax.set_ylabel("learning rate")
    fig.suptitle(args.title or os.path.basename(args.log))
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)
    print("wrote %s" % output)
    return 0
