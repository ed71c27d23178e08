from __future__ import annotations

import pandas as pd

from radixbench.harness.experiments.equivalence import check_equivalence


def _frame(hits: dict[str, list[int]]) -> pd.DataFrame:
    rows = []
    for variant, values in hits.items():
        for rid, h in enumerate(values):
            rows.append(
                {"variant": variant, "rid": rid, "prefix_hit_tokens": h, "status": "finished"}
            )
    return pd.DataFrame(rows)


def test_identical_variants_are_equivalent() -> None:
    eq = check_equivalence(_frame({"a": [0, 5, 9], "b": [0, 5, 9]}))
    assert eq == {"ok": True, "n_requests": 3, "variants": ["a", "b"], "first_diff": None}


def test_first_divergence_is_reported_with_all_values() -> None:
    eq = check_equivalence(_frame({"a": [0, 5, 9, 1], "b": [0, 5, 8, 2], "c": [0, 5, 9, 1]}))
    assert not eq["ok"]
    assert eq["first_diff"] == {"rid": 2, "values": {"a": 9, "b": 8, "c": 9}}


def test_missing_request_in_one_variant_diverges() -> None:
    df = _frame({"a": [1, 2, 3], "b": [1, 2, 3]})
    df = df[~((df.variant == "b") & (df.rid == 1))]
    eq = check_equivalence(df)
    assert not eq["ok"]
    assert eq["first_diff"]["rid"] == 1
    assert eq["first_diff"]["values"]["b"] is None


def test_status_difference_diverges() -> None:
    df = _frame({"a": [1, 2], "b": [1, 2]})
    df.loc[(df.variant == "b") & (df.rid == 0), "status"] = "rejected"
    assert check_equivalence(df)["first_diff"]["rid"] == 0
