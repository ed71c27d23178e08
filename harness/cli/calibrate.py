"""``radixbench calibrate --device cuda --preset P``: fit the roofline's efficiencies to a
synthetic forward of the preset's shapes on this GPU and write them as a preset TOML naming the
device and the date (:mod:`radixbench.bench.calibrate`); prints the measured table beside the
fitted roofline, the preset's roofline and AIC. ``--device cpu``: a dry run at tiny shapes
(tests). Argument parsing and printing only."""

from __future__ import annotations

import argparse
from pathlib import Path

from radixbench.harness.cli.util import DefaultsFormatter, UsageError, positive_int

HELP = "fit the roofline cost model to a synthetic forward on a GPU; write a preset"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``calibrate`` to the subcommands."""
    c = sub.add_parser("calibrate", help=HELP, formatter_class=DefaultsFormatter)
    c.set_defaults(func=run)
    c.add_argument(
        "--preset",
        required=True,
        metavar="NAME|PATH.toml",
        help="the deployment to calibrate (its [model] shapes and [gpu] tp)",
    )
    c.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="cuda: time on this GPU; cpu: a dry run at tiny shapes (tests; calibrates nothing)",
    )
    c.add_argument("--quick", action="store_true", help="the grid's corners only")
    c.add_argument("--reps", type=positive_int, default=5, help="timed forwards per shape")
    c.add_argument("--out", type=Path, metavar="FILE.toml",
                   help="default: runs/calibrate/<preset>-<device>-<date>.toml")  # fmt: skip
    c.add_argument("--seed", type=int, default=0, help="the random weights' seed")


def run(args: argparse.Namespace) -> int:
    """Measure, fit, write the TOML (atomically) and print the table; exit 2 on bad input
    (no GPU for ``--device cuda``, a preset without the shapes calibrate needs)."""
    import pandas as pd
    import torch

    from radixbench.bench import calibrate as cal
    from radixbench.bench.cost import CostGrid
    from radixbench.bench.forward import ModelShape, SyntheticModel
    from radixbench.reports._atomic import atomic_paths

    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda: no CUDA device here (torch.cuda.is_available() is false); "
            "calibrate times a forward on the GPU (--device cpu: a dry run that calibrates nothing)"
        )
    try:
        doc, preset_roof, aic = cal.load_preset(args.preset)
        shape = ModelShape.from_preset(doc, args.preset)
    except ValueError as e:
        raise UsageError(f"--preset: {e}") from None
    dry = args.device == "cpu"
    if dry:
        shape, grid, aic = cal.tiny_shape(shape), cal.DRY_GRID, None
    else:
        grid = CostGrid.quick() if args.quick else CostGrid()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if not dry else "CPU (dry run)"
    model = SyntheticModel(shape, device, seed=args.seed)
    print(f"calibrate {args.preset} on {name}: one TP rank of {shape.tp}, "
          f"{model.weight_bytes / 1e9:.2f} GB of random weights", flush=True)  # fmt: skip
    rows = cal.measure(model, grid, reps=args.reps)
    roof = cal.roofline_of(preset_roof, shape, 4 if dry else 2)  # float32 on the CPU
    fitted, rms = cal.fit(roof, rows)
    out = args.out or cal.default_out(args.preset, name)
    measured = int(rows["measured_s"].notna().sum())
    text = cal.preset_toml(doc, fitted, name, rms, measured, args.preset, dry,
                           model=cal.model_table(shape, doc, dry))  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_paths(out) as (tmp,):
        tmp.write_text(text, encoding="utf-8")
    tab = cal.table(rows, fitted, roof, aic)
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(tab.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"attention: {model.attention_path}")
    print(
        f"fitted: compute {fitted.compute_eff:.3f}, bandwidth {fitted.bw_eff:.3f}, overhead "
        f"{fitted.step_overhead_s * 1e3:.3f} ms; RMS log error {rms:.3f} over {measured} shapes"
        f" (preset: {roof.compute_eff:g}, {roof.bw_eff:g}, {roof.step_overhead_s * 1e3:g} ms)"
    )
    print(f"wrote {out} (--cost-model {out})")
    return 0
